"""The training corpus: which local files, the licence filter, and the train/held-out split.

Recipe (deterministic for a given Python installation):
- the CPython standard library's ``.py`` files (PSF-2.0), tests included, ``site-packages``
  excluded;
- the ``.py`` files of a fixed list of installed distributions (``PACKAGES``), each kept only
  when its licence metadata is permissive (``is_permissive``);
- files larger than ``MAX_FILE_BYTES`` (generated tables) or not valid UTF-8 are skipped;
- a file is held out when the first byte of sha1("<source>/<relative path>") is below
  ``HELDOUT_BELOW`` (about 3% of files), so the split does not depend on the file list order;
- chat samples (``chat_samples``) are made from the docstrings and source of each split's own
  files, so held-out chat samples come only from held-out files.

``python -m training.corpus --out .corpus`` writes the text documents and a manifest.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata as metadata
import json
import re
import sysconfig
from pathlib import Path

PACKAGES = (
    "numpy", "jinja2", "click", "pygments", "rich", "packaging", "markdown-it-py",
    "typer", "pydantic", "networkx", "pluggy", "platformdirs", "filelock",
)
MAX_FILE_BYTES = 200_000
HELDOUT_BELOW = 8  # of 256: first sha1 byte < 8 -> held out (~3%)
PERMISSIVE = {
    "MIT", "BSD", "BSD-2-CLAUSE", "BSD-3-CLAUSE", "0BSD", "APACHE-2.0", "APACHE", "PSF-2.0",
    "ISC", "ZLIB", "PYTHON-2.0", "CNRI-PYTHON", "CC0-1.0",
}
PERMISSIVE_CLASSIFIERS = ("MIT License", "BSD License", "Apache Software License", "ISC License",
                          "Python Software Foundation License")


@dataclasses.dataclass(frozen=True)
class SourceFile:
    source: str  # "stdlib" or a distribution name
    relpath: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.source}/{self.relpath}"

    @property
    def is_heldout(self) -> bool:
        return hashlib.sha1(self.key.encode()).digest()[0] < HELDOUT_BELOW


def licence_tokens(dist: metadata.Distribution) -> list[str]:
    expression = dist.metadata.get("License-Expression") or ""
    if not expression:
        license_field = (dist.metadata.get("License") or "").strip()
        expression = license_field if len(license_field) < 40 else ""
    words = re.split(r"\s+(?:AND|OR|WITH)\s+|[()]", expression)
    return [w.strip().upper().replace(" LICENSE", "").replace(" ", "-") for w in words if w.strip()]


def is_permissive(dist: metadata.Distribution) -> bool:
    """True when every licence named in the metadata is permissive (classifiers as fallback)."""
    tokens = licence_tokens(dist)
    if tokens:
        return all(t in PERMISSIVE or t.startswith("BSD") for t in tokens)
    classifiers = dist.metadata.get_all("Classifier") or []
    licences = [c for c in classifiers if c.startswith("License ::")]
    return bool(licences) and all(c.endswith(PERMISSIVE_CLASSIFIERS) for c in licences)


def read_python_files(root: Path, source: str, skip_dirs: set[str]) -> list[SourceFile]:
    files = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if skip_dirs.intersection(relative.parts) or path.stat().st_size > MAX_FILE_BYTES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text.strip():
            files.append(SourceFile(source, relative.as_posix(), text))
    return files


def stdlib_files() -> list[SourceFile]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return read_python_files(root, "stdlib", {"site-packages", "__pycache__", "dist-packages"})


def package_files(name: str) -> list[SourceFile]:
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return []
    if not is_permissive(dist):
        return []
    top_level = {Path(str(f)).parts[0] for f in dist.files or [] if str(f).endswith(".py")}
    base = Path(str(dist.locate_file("")))
    files = []
    for package_dir in sorted(top_level):
        if (base / package_dir).is_dir():
            files += read_python_files(base / package_dir, name, {"__pycache__"})
    return files


def collect() -> list[SourceFile]:
    files = stdlib_files()
    for name in PACKAGES:
        files += package_files(name)
    return files


def manifest(files: list[SourceFile]) -> dict:
    sources: dict[str, dict] = {}
    for f in files:
        entry = sources.setdefault(f.source, {"files": 0, "bytes": 0, "heldout_files": 0})
        entry["files"] += 1
        entry["bytes"] += len(f.text.encode())
        entry["heldout_files"] += int(f.is_heldout)
    for name in sources:
        if name != "stdlib":
            dist = metadata.distribution(name)
            sources[name]["version"] = dist.version
            sources[name]["licence"] = " ".join(licence_tokens(dist)) or "classifier: permissive"
        else:
            sources[name]["version"] = sysconfig.get_python_version()
            sources[name]["licence"] = "PSF-2.0"
    digest = hashlib.sha256("".join(f.key + f.text for f in files).encode()).hexdigest()
    return {"sources": sources, "sha256": digest, "heldout_rule": f"sha1(source/relpath)[0] < {HELDOUT_BELOW}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    files = collect()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "manifest.json").write_text(json.dumps(manifest(files), indent=1))
    print(json.dumps(manifest(files)["sources"], indent=1))


if __name__ == "__main__":
    main()
