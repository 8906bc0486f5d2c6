"""Print the Debian bookworm sources this machine's apt uses, one mmdebstrap argument a line.

mmdebstrap builds the offline base from the same mirror apt already reaches here (reads
/etc/apt/sources.list and sources.list.d, both the one-line and the deb822 forms); other
vendors' repositories in those files are left out.
"""

from __future__ import annotations

import glob
import sys

SUITES = {"bookworm", "bookworm-updates", "bookworm-security"}


def one_line_entries(text: str) -> list[tuple[str, str, str]]:
    found = []
    for line in text.splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 4 and parts[0] == "deb":
            rest = [p for p in parts[1:] if not p.startswith("[")]
            if len(rest) >= 3:
                found.append((rest[0], rest[1], " ".join(rest[2:])))
    return found


def deb822_entries(text: str) -> list[tuple[str, str, str]]:
    found = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                found.append((uri, suite, fields.get("components", "main")))
    return found


def main() -> int:
    entries: list[tuple[str, str, str]] = []
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*"))]:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            continue
        entries += deb822_entries(text) if path.endswith(".sources") else one_line_entries(text)
    lines = []
    for uri, suite, _components in entries:
        if suite in SUITES:
            line = f"deb {uri} {suite} main"
            if line not in lines:
                lines.append(line)
    if not lines:
        print("no Debian bookworm source in /etc/apt/sources.list*", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
