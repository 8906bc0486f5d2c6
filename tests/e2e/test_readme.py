"""The README's quick-start snippet works as printed (against a real server)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_tritonclient_snippet(server):
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    snippet = next(b for b in blocks if "tritonclient.http" in b)
    assert "localhost:8000" in snippet
    code = snippet.replace("localhost:8000", server.http_url)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[11. 22. 33. 44.]", "[ -9. -18. -27. -36.]"]
