// Unit square (0,1)^2 minus the disc r <= 0.2 centred at (0.5,0.5).
// Two cell regions sharing the circle r = 0.3 conformingly:
//   "ring"  = annulus 0.2 < r < 0.3,   "plate" = the rest.
// OpenCASCADE kernel. Mesh with: scripts/make-meshes.py.
SetFactory("OpenCASCADE");

h = 0.12; // target element size (level 0)

Rectangle(1) = {0, 0, 0, 1, 1};
Disk(2) = {0.5, 0.5, 0, 0.2};
Disk(3) = {0.5, 0.5, 0, 0.3};

// Square with a hole; then fragment it with the r = 0.3 disc so that the
// annulus and the outer plate become two surfaces sharing one circle.
BooleanDifference(4) = { Surface{1}; Delete; }{ Surface{2}; Delete; };
BooleanFragments{ Surface{4}; Delete; }{ Surface{3}; Delete; }
// The fragments also contain the part of disc 3 inside the hole (r < 0.2);
// delete it (it is the only surface inside x,y in [0.3,0.7]).
inner() = Surface In BoundingBox{0.29, 0.29, -1, 0.71, 0.71, 1};
If (#inner() > 0)
  Recursive Delete { Surface{inner()}; }
EndIf

ring()  = Surface In BoundingBox{0.19, 0.19, -1, 0.81, 0.81, 1};
plate() = Surface{:};
plate() -= ring();

hole()   = Curve In BoundingBox{0.29, 0.29, -1, 0.71, 0.71, 1}; // r = 0.2
middle() = Curve In BoundingBox{0.19, 0.19, -1, 0.81, 0.81, 1}; // r = 0.2 and 0.3
outer()  = Curve{:};
outer() -= middle();

MeshSize{ PointsOf{ Surface{:}; } } = h;
Mesh.MeshSizeMax = h;

Physical Curve("outer", 1) = {outer()};
Physical Curve("hole", 2) = {hole()};
Physical Surface("plate", 3) = {plate()};
Physical Surface("ring", 4) = {ring()};
// The internal circle r = 0.3 deliberately has no physical group.
