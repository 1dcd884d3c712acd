#!/usr/bin/env python3
"""Generate the example Gmsh meshes shipped in examples/meshes/.

What it does
    For every geometry examples/meshes/<name>.geo it opens the file through the
    gmsh Python API, meshes it, writes examples/meshes/<name>-<level>.msh
    (MSH 4.1) for the level-0 mesh and for nested uniform refinements
    (gmsh.model.mesh.refine()), and finally reloads EVERY written .msh file
    with gmsh.open to record what Gmsh itself reports about it in
    examples/meshes/gmsh-counts.json (node and element counts, physical
    groups, number of cells, negatively oriented cells, total measure,
    boundary facets per group). The counts use only gmsh and numpy, never
    any code of this library, so tests can compare the library's reader
    against them.

Install
    pip install gmsh numpy        (tested with gmsh 4.15.2)

Run (from the repository root)
    python3 scripts/make-meshes.py

Notes
    * Only elements belonging to physical groups are saved (Mesh.SaveAll = 0).
    * cube-with-hole-*.msh and l-shape-1-binary.msh are binary, the rest ASCII.
    * Curved boundaries and refinement: gmsh.model.mesh.refine() first makes
      the mesh second order and then splits every element. With the default
      Mesh.SecondOrderLinear = 0 the new mid-edge nodes on curves / surfaces
      are placed ON the CAD geometry (via its parametrisation), not at the
      straight-edge midpoint, so refined nodes on the circles / the cylinder
      lie exactly on the geometry. This script asserts that.
    * square-crack.geo meshes itself and runs Plugin(Crack) while it is
      parsed; the node count of the same mesh without the crack is stored as
      "uncracked_nodes" in its gmsh-counts.json entry.
"""

import json
import os
import sys

import gmsh
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MESH_DIR = os.path.join(ROOT, "examples", "meshes")

# Largest file size for an optional extra refinement level of the 3D mesh.
MAX_OPTIONAL_BYTES = 3_000_000

# name, topological dimension, levels always written, binary encoding,
# optional extra level (kept only below MAX_OPTIONAL_BYTES), radii of the
# circles / cylinder centred on x = y = 0.5 whose nodes are checked after
# every refinement, premeshed = the .geo meshes itself (Plugin(Crack)).
MESHES = [
    dict(name="l-shape", dim=2, levels=[0, 1, 2, 3], binary=False),
    dict(name="plate-with-hole", dim=2, levels=[0, 1, 2], binary=False,
         circles=[0.2, 0.3]),
    dict(name="cube-with-hole", dim=3, levels=[0, 1], binary=True,
         optional_level=2, circles=[0.2]),
    dict(name="square-clockwise", dim=2, levels=[0], binary=False),
    dict(name="square-crack", dim=2, levels=[0], binary=False,
         premeshed=True),
]

# Extra copies in the other encoding: (name, level) -> file name.
BINARY_COPIES = {("l-shape", 1): "l-shape-1-binary.msh"}

CELL_TYPE = {2: 2, 3: 4}    # gmsh type: 3-node triangle, 4-node tetrahedron


def fresh_session():
    """Restart gmsh: options set by one .geo (Mesh.MeshSizeMax, plugin options)
    and the global node/element numbering must not leak into the next mesh,
    so every mesh is made exactly as `gmsh <name>.geo` would make it."""
    if gmsh.isInitialized():
        gmsh.finalize()
    gmsh.initialize(sys.argv[:1])
    gmsh.option.setNumber("General.Terminal", 0)
    gmsh.option.setNumber("Mesh.MshFileVersion", 4.1)
    gmsh.option.setNumber("Mesh.SaveAll", 0)
    gmsh.option.setNumber("Mesh.SecondOrderLinear", 0)  # refine onto the CAD


def write(path, binary):
    gmsh.option.setNumber("Mesh.Binary", 1 if binary else 0)
    gmsh.write(path)
    print(f"  wrote {os.path.relpath(path, ROOT)} "
          f"({os.path.getsize(path)} bytes, {'binary' if binary else 'ASCII'})")


def check_curved_nodes(radii, level):
    """Nodes classified on curved entities must lie on their circle/cylinder."""
    if not radii:
        return
    for dim, tag in gmsh.model.getEntities():
        if dim not in (1, 2) or gmsh.model.getType(dim, tag) not in (
                "Ellipse", "Circle", "Cylinder"):
            continue
        _, xyz, _ = gmsh.model.mesh.getNodes(dim, tag, includeBoundary=True)
        xyz = np.asarray(xyz).reshape(-1, 3)
        r = np.hypot(xyz[:, 0] - 0.5, xyz[:, 1] - 0.5)
        target = min(radii, key=lambda R: abs(R - r.mean()))
        err = np.abs(r - target).max()
        print(f"  level {level}: {len(r)} nodes on {gmsh.model.getType(dim, tag)}"
              f" ({dim},{tag}) r={target}: max |r - R| = {err:.2e}")
        assert err < 1e-9, "refined node off the curved geometry"


def generate(spec):
    name, dim = spec["name"], spec["dim"]
    print(f"{name}:")
    fresh_session()
    gmsh.open(os.path.join(MESH_DIR, name + ".geo"))
    if spec.get("premeshed"):
        # Plugin(Crack) leaves gaps in the node and element tags (e.g. element
        # tags up to 668 for 260 elements); make them contiguous, as
        # `gmsh -2 square-crack.geo` does, so the crack is the only defect.
        gmsh.model.mesh.renumberNodes()
        gmsh.model.mesh.renumberElements()
    else:
        gmsh.model.mesh.generate(dim)
    written = []
    levels = list(spec["levels"])
    optional = spec.get("optional_level")
    top = max(levels + ([optional] if optional is not None else []))
    for level in range(top + 1):
        if level > 0:
            gmsh.model.mesh.refine()
        check_curved_nodes(spec.get("circles"), level)
        path = os.path.join(MESH_DIR, f"{name}-{level}.msh")
        write(path, spec["binary"])
        if level == optional and level not in levels:
            if os.path.getsize(path) > MAX_OPTIONAL_BYTES:
                print(f"  dropped optional level {level} (too large)")
                os.remove(path)
                continue
        written.append(os.path.basename(path))
        copy = BINARY_COPIES.get((name, level))
        if copy:
            write(os.path.join(MESH_DIR, copy), not spec["binary"])
            written.append(copy)
    return written


def uncracked_node_count():
    """Node count of square-crack's mesh before Plugin(Crack) ran."""
    fresh_session()
    # gmsh.open() would reset the parser variables; merge() keeps them, so
    # DefineConstant[crack = 1] in the .geo sees crack = 0 and skips the crack.
    gmsh.parser.setNumber("crack", [0])
    gmsh.merge(os.path.join(MESH_DIR, "square-crack.geo"))
    gmsh.parser.clear("crack")
    gmsh.model.mesh.generate(2)
    return len(gmsh.model.mesh.getNodes()[0])


def counts(path):
    """What gmsh reports about a .msh file as written (reloaded from disk)."""
    fresh_session()
    gmsh.open(path)
    m = gmsh.model
    dim = m.getDimension()

    node_tags, xyz, _ = m.mesh.getNodes()
    xyz = np.asarray(xyz).reshape(-1, 3)
    index = np.zeros(int(node_tags.max()) + 1, dtype=np.int64)
    index[node_tags] = np.arange(len(node_tags))

    by_type = {}
    types, elem_tags, _ = m.mesh.getElements()
    for t, tags in zip(types, elem_tags):
        by_type[str(int(t))] = by_type.get(str(int(t)), 0) + len(tags)

    groups, facets = [], {}
    for gdim, gtag in m.getPhysicalGroups():
        n = 0
        for ent in m.getEntitiesForPhysicalGroup(gdim, gtag):
            _, etags, _ = m.mesh.getElements(gdim, ent)
            n += sum(len(x) for x in etags)
        pname = m.getPhysicalName(gdim, gtag)
        groups.append({"dim": int(gdim), "tag": int(gtag), "name": pname,
                       "elements": int(n)})
        if gdim == dim - 1:
            facets[pname] = int(n)

    _, conn = m.mesh.getElementsByType(CELL_TYPE[dim])
    nv = dim + 1
    p = xyz[index[np.asarray(conn, dtype=np.int64)]].reshape(-1, nv, 3)
    if dim == 2:
        a, b = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
        signed = 0.5 * (a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0])
    else:
        signed = np.linalg.det(p[:, 1:] - p[:, :1]) / 6.0

    return {
        "nodes": int(len(node_tags)),
        "elements_by_type": dict(sorted(by_type.items(), key=lambda kv: int(kv[0]))),
        "physical_groups": groups,
        "cells": int(len(signed)),
        "negatively_oriented_cells": int((signed < 0).sum()),
        "measure": float(np.abs(signed).sum()),
        "boundary_facets_by_group": facets,
    }


def main():
    try:
        files = []
        for spec in MESHES:
            files += generate(spec)

        uncracked = uncracked_node_count()

        record = {}
        for f in files:
            record[f] = counts(os.path.join(MESH_DIR, f))
        crack = record["square-crack-0.msh"]
        crack["uncracked_nodes"] = uncracked
        print(f"square-crack: {crack['nodes']} nodes, {uncracked} without the crack")
        assert crack["nodes"] > uncracked, "Plugin(Crack) duplicated no node"
        cw = record["square-clockwise-0.msh"]
        assert cw["negatively_oriented_cells"] == cw["cells"], "clockwise square"

        with open(os.path.join(MESH_DIR, "gmsh-counts.json"), "w") as fh:
            json.dump(record, fh, indent=2)
            fh.write("\n")
        for f in files:
            r = record[f]
            print(f"{f:28s} nodes {r['nodes']:6d} cells {r['cells']:6d} "
                  f"neg {r['negatively_oriented_cells']:6d} "
                  f"measure {r['measure']:.6f} facets {r['boundary_facets_by_group']}")
    finally:
        if gmsh.isInitialized():
            gmsh.finalize()


if __name__ == "__main__":
    main()
