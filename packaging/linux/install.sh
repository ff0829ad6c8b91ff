#!/usr/bin/env bash
# Install a built bundle with its launcher entry, icons and AppStream metadata:
#
#   packaging/linux/install.sh [--prefix DIR] [--bundle DIR]     # default: ~/.local, dist/wisp-desktop
#
# --prefix /usr/local (as root) installs it for every user. To remove it, delete the files this prints.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix="$HOME/.local"
bundle="$root/dist/wisp-desktop"
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --bundle) bundle=$2; shift 2 ;;
        *) echo "usage: packaging/linux/install.sh [--prefix DIR] [--bundle DIR]" >&2; exit 2 ;;
    esac
done
[ -x "$bundle/wisp-desktop" ] || { echo "no bundle in $bundle: run packaging/build.sh first" >&2; exit 2; }

target="$prefix/lib/wisp-desktop"
rm -rf "$target"
mkdir -p "$prefix/lib" "$prefix/bin"
cp -r "$bundle" "$target"
ln -sf "$target/wisp-desktop" "$prefix/bin/wisp-desktop"
desktop="$prefix/share/applications/wisp-desktop.desktop"
install -Dm644 "$here/wisp-desktop.desktop" "$desktop"
sed -i "s|^Exec=wisp-desktop|Exec=$prefix/bin/wisp-desktop|; s|^TryExec=wisp-desktop|TryExec=$prefix/bin/wisp-desktop|" "$desktop"
install -Dm644 "$here/wisp-desktop.metainfo.xml" "$prefix/share/metainfo/wisp-desktop.metainfo.xml"
icons="$root/resources/icons/hicolor"
for icon in "$icons"/*/apps/wisp-desktop.*; do
    install -Dm644 "$icon" "$prefix/share/icons/hicolor/${icon#"$icons"/}"
done
update-desktop-database -q "$prefix/share/applications" 2>/dev/null || true
gtk-update-icon-cache -q -t "$prefix/share/icons/hicolor" 2>/dev/null || true
printf '%s\n' "installed:" "  $target/" "  $prefix/bin/wisp-desktop" "  $desktop" \
    "  $prefix/share/metainfo/wisp-desktop.metainfo.xml" "  $prefix/share/icons/hicolor/*/apps/wisp-desktop.*"
