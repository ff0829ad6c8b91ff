#!/usr/bin/env bash
# Build the one-folder desktop bundle with PyInstaller and check it with its own --self-test.
#
#   packaging/build.sh [--dist DIR] [--work DIR] [--no-check]
#
# Run it in an environment that has Wisp's dependencies and PyInstaller (`pip install -e ".[app]" pyinstaller`,
# or the `test` extra, which has both). The bundle gets whatever torch that environment has: the CPU build gives
# a bundle of about 1 GB, a CUDA build several GB. Output: DIST/wisp-desktop/wisp-desktop (default DIST: dist/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dist="$root/dist"
work="$root/build/pyinstaller"
check=1
while [ $# -gt 0 ]; do
    case "$1" in
        --dist) dist=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --no-check) check=0; shift ;;
        *) echo "usage: packaging/build.sh [--dist DIR] [--work DIR] [--no-check]" >&2; exit 2 ;;
    esac
done
python=${PYTHON:-python3}
"$python" -c "import PyInstaller" 2>/dev/null || { echo "PyInstaller is missing: pip install pyinstaller" >&2; exit 2; }

started=$(date +%s)
"$python" -m PyInstaller --noconfirm --clean --log-level WARN --distpath "$dist" --workpath "$work" \
    "$root/packaging/wisp-desktop.spec"
echo "built $dist/wisp-desktop in $(( $(date +%s) - started )) s, $(du -sh "$dist/wisp-desktop" | cut -f1)"

if [ "$check" = 1 ]; then
    QT_QPA_PLATFORM=offscreen WISP_DATA_DIR="$work/self-test-data" "$dist/wisp-desktop/wisp-desktop" --self-test
fi
