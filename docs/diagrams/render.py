"""Render the docs' diagrams: docs/diagrams/<name>.mmd (Mermaid source) -> <name>.svg, committed.

The site shows the SVG files, so building it needs neither JavaScript from a CDN nor Node: run this (`make
docs-diagrams`) after changing a .mmd file. It needs Node's npx (it fetches @mermaid-js/mermaid-cli from the npm
registry) and a Chromium: set CHROMIUM to its path if `chromium` is not on PATH. Each SVG records the SHA-256 of
its source, and tests/docs/test_docs.py fails when a source changed without its SVG being rendered again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MERMAID_CLI = "@mermaid-js/mermaid-cli@11"


def source_digest(source: Path) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


def render(source: Path, chromium: str) -> None:
    target = source.with_suffix(".svg")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "puppeteer.json"
        config.write_text(json.dumps({"executablePath": chromium, "args": ["--no-sandbox"]}))
        out = Path(tmp) / target.name
        subprocess.run(["npx", "--yes", "-p", MERMAID_CLI, "mmdc", "-q", "-b", "white", "-p", str(config),
                        "-i", str(source), "-o", str(out)], check=True,
                       env={**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"})
        svg = out.read_text()
    target.write_text(f"<!-- rendered from {source.name}, sha256 {source_digest(source)} -->\n{svg}\n")
    print(f"{source.name} -> {target.name}")


def main() -> int:
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium or not shutil.which("npx"):
        print("error: rendering the diagrams needs npx (Node.js) and Chromium (set CHROMIUM=/path/to/chromium)",
              file=sys.stderr)
        return 2
    for source in sorted(HERE.glob("*.mmd")):
        render(source, chromium)
    return 0


if __name__ == "__main__":
    sys.exit(main())
