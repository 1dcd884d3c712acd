#!/usr/bin/env python3
"""Reads a .vtu file written by hdg::vtu with meshio, a reader independent of the writer.

    python3 scripts/check-vtu.py FILE.vtu          a summary: cells by type, field ranges
    python3 scripts/check-vtu.py --json FILE.vtu   everything as JSON on stdout

The JSON holds the points (3 coordinates each), the cells in file order as VTK type numbers
with their connectivity and offsets (the end of each cell in the connectivity), the point data
(name -> number of components and values, point-major) and the cell data (name -> one value per
cell). The test crates/hdg/tests/vtu.rs compares it with the solution (`cargo test --release
-p hdg --test vtu -- --ignored`). Needs meshio (`python3 -m pip install meshio`).
"""
import argparse
import json
import sys

import meshio
import numpy as np
from meshio._vtk_common import meshio_to_vtk_type


def read(path):
    mesh = meshio.read(path, file_format="vtu")
    types, connectivity, offsets = [], [], []
    for block in mesh.cells:
        vtk_type = meshio_to_vtk_type[block.type]
        for cell in np.asarray(block.data):
            types.append(int(vtk_type))
            connectivity.extend(int(i) for i in cell)
            offsets.append(len(connectivity))
    point_data = {}
    for name, values in mesh.point_data.items():
        values = np.asarray(values, dtype=float)
        components = 1 if values.ndim == 1 else values.shape[1]
        point_data[name] = {"components": components, "values": values.ravel().tolist()}
    cell_data = {
        name: np.concatenate([np.asarray(b, dtype=float).ravel() for b in blocks]).tolist()
        for name, blocks in mesh.cell_data.items()
    }
    return {
        "points": np.asarray(mesh.points, dtype=float).tolist(),
        "types": types,
        "connectivity": connectivity,
        "offsets": offsets,
        "point_data": point_data,
        "cell_data": cell_data,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    args = parser.parse_args()
    grid = read(args.file)
    if args.json:
        json.dump(grid, sys.stdout)
        return
    print(f"{args.file}: {len(grid['points'])} points, {len(grid['types'])} cells")
    for vtk_type in sorted(set(grid["types"])):
        print(f"  VTK cell type {vtk_type}: {grid['types'].count(vtk_type)} cells")
    for name, data in grid["point_data"].items():
        values = np.asarray(data["values"])
        print(f"  point data {name} ({data['components']}): [{values.min():.6g}, {values.max():.6g}]")
    for name, values in grid["cell_data"].items():
        values = np.asarray(values)
        print(f"  cell data {name}: [{np.nanmin(values):.6g}, {np.nanmax(values):.6g}]")


if __name__ == "__main__":
    main()
