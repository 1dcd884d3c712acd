// Unit cube (0,1)^3 minus the cylinder r <= 0.2 along z through (0.5,0.5).
// OpenCASCADE kernel. Mesh with: scripts/make-meshes.py.
SetFactory("OpenCASCADE");

h = 0.25; // target element size (level 0)

Box(1) = {0, 0, 0, 1, 1, 1};
Cylinder(2) = {0.5, 0.5, 0, 0, 0, 1, 0.2};
BooleanDifference(3) = { Volume{1}; Delete; }{ Volume{2}; Delete; };

// Lateral surface of the cylinder: the only faces inside x,y in [0.3,0.7].
hole()  = Surface In BoundingBox{0.29, 0.29, -0.01, 0.71, 0.71, 1.01};
outer() = Surface{:};
outer() -= hole(); // what remains of the six cube faces

MeshSize{ PointsOf{ Volume{:}; } } = h;
Mesh.MeshSizeMax = h;

Physical Surface("outer", 1) = {outer()};
Physical Surface("hole", 2) = {hole()};
Physical Volume("body", 3) = {3};
