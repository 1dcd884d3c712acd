// DELIBERATELY BAD MESH: unit square with an internal crack.
// The segment (0.3,0.5)-(0.7,0.5) is embedded in the surface, the mesh is
// generated, then Plugin(Crack) duplicates the mesh nodes strictly inside the
// segment (its two end points, the crack tips, stay shared), and the triangles
// on one side of the segment are reconnected to the duplicates. The mesh is
// then no longer conforming across the segment. Built-in kernel.
//
// Write it with `gmsh square-crack.geo -save -o square-crack-0.msh` (or
// scripts/make-meshes.py), NOT with `gmsh -2 ...`: -2 meshes surface 1 again
// after the script ran, which undoes the crack (the triangles go back to the
// original nodes and the duplicated nodes are left on the lip curve only).
SetFactory("Built-in");

h = 0.15; // target element size

Point(1) = {0, 0, 0, h};
Point(2) = {1, 0, 0, h};
Point(3) = {1, 1, 0, h};
Point(4) = {0, 1, 0, h};
Point(5) = {0.3, 0.5, 0, h / 2};
Point(6) = {0.7, 0.5, 0, h / 2};

Line(1) = {1, 2};
Line(2) = {2, 3};
Line(3) = {3, 4};
Line(4) = {4, 1};
Line(5) = {5, 6}; // the crack

Curve Loop(1) = {1, 2, 3, 4};
Plane Surface(1) = {1};
Curve{5} In Surface{1};

Physical Curve("boundary", 1) = {1, 2, 3, 4};
Physical Curve("crack", 2) = {5};
Physical Surface("domain", 3) = {1};

// The crack plugin works on a mesh, so mesh first, then run it.
// Define crack = 0 beforehand (gmsh -setnumber crack 0, or
// gmsh.parser.setNumber) to get the geometry only, unmeshed and uncracked.
DefineConstant[ crack = 1 ];
If (crack)
  Mesh 2;
  Plugin(Crack).Dimension = 1;
  Plugin(Crack).PhysicalGroup = 2;    // "crack"
  Plugin(Crack).NormalX = 0;          // reference normal of the surface
  Plugin(Crack).NormalY = 0;
  Plugin(Crack).NormalZ = 1;
  Plugin(Crack).OpenBoundaryPhysicalGroup = 0; // tips stay shared (internal crack)
  Plugin(Crack).NewPhysicalGroup = 2; // the duplicated lip joins "crack" too
  Plugin(Crack).Run;
EndIf
