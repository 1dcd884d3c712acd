// L-shaped domain (-1,1)^2 minus [0,1]x[-1,0], with a re-entrant corner at (0,0).
// Built-in kernel. Mesh with: scripts/make-meshes.py (or `gmsh -2 l-shape.geo`).
SetFactory("Built-in");

h = 0.3; // target element size (level 0)

Point(1) = {-1, -1, 0, h};
Point(2) = { 0, -1, 0, h};
Point(3) = { 0,  0, 0, h}; // re-entrant corner
Point(4) = { 1,  0, 0, h};
Point(5) = { 1,  1, 0, h};
Point(6) = {-1,  1, 0, h};

Line(1) = {1, 2};
Line(2) = {2, 3}; // meets the re-entrant corner
Line(3) = {3, 4}; // meets the re-entrant corner
Line(4) = {4, 5};
Line(5) = {5, 6};
Line(6) = {6, 1};

Curve Loop(1) = {1, 2, 3, 4, 5, 6}; // counter-clockwise
Plane Surface(1) = {1};

Physical Curve("reentrant", 1) = {2, 3};
Physical Curve("outer", 2) = {1, 4, 5, 6};
Physical Surface("domain", 3) = {1};
