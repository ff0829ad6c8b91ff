"""Files attached as context in code mode: read them (text only, bounded), and format them for the prompt."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 256 * 1024
MAX_FOLDER_FILES = 200
SKIPPED_FOLDERS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache",
                   ".pytest_cache", "build", "dist", ".idea", ".vscode"}


@dataclass(frozen=True)
class Attachment:
    path: Path
    text: str


def read_text_file(path: Path) -> str | None:
    """The file's text, or None for binaries and files over MAX_FILE_BYTES."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return None
    return data.decode("utf-8", errors="replace")


def files_in(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.rglob("*")):
        if any(part in SKIPPED_FOLDERS or part.startswith(".") for part in path.relative_to(folder).parts[:-1]):
            continue
        if path.is_file() and not path.name.startswith("."):
            found.append(path)
        if len(found) >= MAX_FOLDER_FILES:
            break
    return found


def read_attachments(paths: list[Path]) -> list[Attachment]:
    """Worker thread: files and folders (expanded) to Attachments, skipping what is not text."""
    files = [file for path in paths for file in (files_in(path) if path.is_dir() else [path])]
    read = [(file, read_text_file(file)) for file in files]
    return [Attachment(file, text) for file, text in read if text is not None]


def context_block(attachments: list[Attachment]) -> str:
    parts = [f"File `{a.path}`:\n```{language_tag(a.path)}\n{a.text.rstrip()}\n```" for a in attachments]
    return "\n\n".join(parts)


def language_tag(path: Path) -> str:
    return {".py": "python", ".rs": "rust", ".js": "javascript", ".ts": "typescript", ".c": "c", ".h": "c",
            ".cpp": "cpp", ".go": "go", ".java": "java", ".sh": "bash", ".md": "markdown", ".toml": "toml",
            ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".html": "html", ".css": "css"}.get(path.suffix, "")
