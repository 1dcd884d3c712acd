#!/usr/bin/env bash
# Regenerates crates/hdg-backend-cuda/driver/symbols.txt: every CUDA driver entry point that
# cust_raw binds (all of them return CUresult), cuInit excepted (the loader defines it itself).
# Run after a cust upgrade; the link checks the list (scripts/cuda-toolchain.sh gives the
# linker an empty libcuda, so an entry point missing here is an undefined symbol).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version="$(grep -A1 '^name = "cust_raw"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')"
[ -d "$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"cust_raw-$version" 2>/dev/null | head -n1)" ] ||
  cargo fetch >&2
src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"cust_raw-$version"/src | head -n1)"
{
  echo "# CUDA driver entry points bound by cust_raw $version (scripts/cuda-driver-symbols.sh)."
  grep -ho 'pub fn cu[A-Za-z0-9_]*' "$src"/*.rs | sed 's/pub fn //' | sort -u | grep -vx cuInit
} > crates/hdg-backend-cuda/driver/symbols.txt
wc -l crates/hdg-backend-cuda/driver/symbols.txt
