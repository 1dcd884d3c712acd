// Unit square whose Plane Surface is bounded by a CLOCKWISE curve loop, so the
// surface normal is -z and Gmsh writes its triangles clockwise (negative
// signed area in the xy-plane). Built-in kernel.
SetFactory("Built-in");

h = 0.15; // target element size

Point(1) = {0, 0, 0, h};
Point(2) = {1, 0, 0, h};
Point(3) = {1, 1, 0, h};
Point(4) = {0, 1, 0, h};

Line(1) = {1, 2};
Line(2) = {2, 3};
Line(3) = {3, 4};
Line(4) = {4, 1};

// Clockwise traversal: (0,0) -> (0,1) -> (1,1) -> (1,0) -> (0,0).
Curve Loop(1) = {-4, -3, -2, -1};
Plane Surface(1) = {1};

Physical Curve("boundary", 1) = {1, 2, 3, 4};
Physical Surface("domain", 2) = {1};
