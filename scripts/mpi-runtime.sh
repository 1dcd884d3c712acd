#!/usr/bin/env bash
# OpenMPI's runtime for machines that have none (the GPU machines): Debian's packages, fetched
# here into the ignored folder .mpi/ and unpacked there without installing them.
#
#   scripts/mpi-runtime.sh fetch          # here: .mpi/*.deb (about 6 MB)
#   source scripts/mpi-runtime.sh env     # there, from the repository root: unpacks .mpi/ into
#                                         # /tmp/mpi and sets PATH, LD_LIBRARY_PATH, OPAL_PREFIX
#
# The device tool sends ignored folders only when asked: name .mpi in the call's `carry`.
packages=(libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200
  libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libxnvctrl0)
case "${1:-}" in
  fetch)
    set -euo pipefail
    mkdir -p .mpi
    grep -qx '/.mpi/' .git/info/exclude 2>/dev/null || echo '/.mpi/' >> .git/info/exclude
    (cd .mpi && apt-get download "${packages[@]}")
    ;;
  env)
    mkdir -p /tmp/mpi
    for f in .mpi/*.deb; do dpkg -x "$f" /tmp/mpi; done
    export OPAL_PREFIX=/tmp/mpi/usr PATH="/tmp/mpi/usr/bin:$PATH"
    export LD_LIBRARY_PATH="/tmp/mpi/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    # A system PMIx's compression plugin may not match the carried one: quiet its warning.
    export PMIX_MCA_pcompress_base_silence_warning=1
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # One node: shared memory between the ranks (the carried network transports find no
    # devices there and only warn).
    export OMPI_MCA_btl=self,vader
    ;;
  *)
    echo "usage: scripts/mpi-runtime.sh fetch | source scripts/mpi-runtime.sh env" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
