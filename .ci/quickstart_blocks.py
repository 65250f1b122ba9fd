"""Runs the code blocks of a quick start page exactly as written (.ci/quickstarts.sh).

Usage:
  quickstart_blocks.py sections PAGE
      the `## ` sections of PAGE that have blocks to run, one per line
  quickstart_blocks.py run PAGE SECTION DIR [TIMEOUT_SECS]
      runs SECTION's blocks in DIR (empty), in the environment it is given
  quickstart_blocks.py copies PAGE SOURCE
      checks that each block of PAGE marked `<!-- quickstart: from SOURCE -->` is, character
      for character, a block of SOURCE (which CI runs)

What a block of a section does, in the page's order, as a reader following it would:
  ```sh (bash, shell)      runs; every block of a section in one bash (set -euo pipefail), so
                           variables, `cd` and an activated virtual environment carry over
  ```LANG title="NAME"     is written to the file NAME, in the directory the blocks are in then
  ```json, ```text, …      shows something; nothing is done with it
A `<!-- quickstart: skip (why) -->` line just before a block leaves it out (the reason is
required). A ```python, ```ts or ```js block with neither a title nor a skip is an error: code
on the page that CI would not run. Each `# → TEXT` line of a block that runs is what it prints:
the block's output must have a line containing TEXT, in order after the previous one's; `…`
in TEXT stands for anything.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field

RUN = {"sh", "bash", "shell"}
CODE = {"python", "py", "ts", "typescript", "js", "javascript", "mjs"}
DIRECTIVE = re.compile(r"^<!--\s*quickstart:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(`{3,})\s*(.*)$")
TITLE = re.compile(r'\btitle="([^"]+)"')
EXPECT = re.compile(r"^\s*# → (.*)$")


def die(message: str) -> None:
    print(f"quickstart: {message}", file=sys.stderr)
    sys.exit(1)


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    section: str
    lang: str
    title: str | None
    directive: str | None
    text: str
    expect: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse(page: str) -> list[Block]:
    lines = open(page, encoding="utf-8").read().split("\n")
    blocks, section, directive, i = [], "", None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section, directive = line[3:].strip(), None
        elif m := DIRECTIVE.match(line):
            directive = m.group(1)
        elif m := FENCE.match(line):
            ticks, info = m.group(1), m.group(2).strip()
            end = i + 1
            while end < len(lines) and not (
                lines[end].startswith(ticks) and lines[end].strip("`").strip() == ""
            ):
                end += 1
            if end == len(lines):
                die(f"{page}:{i + 1}: a code block that is never closed")
            title = TITLE.search(info)
            text = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(
                Block(
                    page=page,
                    line=i + 1,
                    section=section,
                    lang=(info.split() or [""])[0].lower(),
                    title=title.group(1) if title else None,
                    directive=directive,
                    text=text,
                    expect=[m.group(1).strip() for t in text.split("\n") if (m := EXPECT.match(t))],
                )
            )
            directive, i = None, end
        elif line.strip():
            directive = None
        i += 1
    return blocks


def role(block: Block) -> str:
    """'run', 'file', 'skip' or 'show'; dies on a block CI cannot account for."""
    if block.directive is not None:
        if re.fullmatch(r"skip \(.+\)", block.directive):
            return "skip"
        if block.directive.startswith("from "):
            return "show"
        die(f"{block.where}: unknown directive `quickstart: {block.directive}` (skip (why) or from PAGE)")
    if block.title:
        if "/" in block.title or block.title.startswith("."):
            die(f"{block.where}: title {block.title!r}: a plain file name, please")
        return "file"
    if block.lang in RUN:
        return "run"
    if block.lang in CODE:
        die(
            f"{block.where}: a ```{block.lang} block CI would not run: give it title=\"FILE\" (and run "
            f"the file from a ```sh block) or mark it <!-- quickstart: skip (why) -->"
        )
    return "show"


def sections(page: str) -> list[str]:
    seen = []
    for block in parse(page):
        if role(block) in ("run", "file") and block.section not in seen:
            seen.append(block.section)
    return seen


def script(blocks: list[Block], files_dir: str, out_dir: str) -> str:
    """One bash script for a section: each block's output to OUT/N.out, then shown."""
    parts = [
        "set -euo pipefail",
        "exec 3>&1",
        f"__qs_out={shlex.quote(out_dir)}",
        "__qs_n=0",
        '__qs_exit() { local rc=$?; if [ "$rc" -ne 0 ] && [ -f "$__qs_out/$__qs_n.out" ]; then '
        'cat "$__qs_out/$__qs_n.out" >&3; fi; exit "$rc"; }',
        "trap __qs_exit EXIT",
    ]
    for n, block in enumerate(blocks):
        kind = role(block)
        if kind == "file":
            src = os.path.join(files_dir, str(n))
            with open(src, "w", encoding="utf-8") as f:
                f.write(block.text)
            parts.append(f"printf '\\n--- %s: wrote %s\\n' {shlex.quote(block.where)} {shlex.quote(block.title)}")
            parts.append(f"cp {shlex.quote(src)} {shlex.quote(block.title)}")
        elif kind == "run":
            shown = "".join(f"  | {t}\n" for t in block.text.rstrip("\n").split("\n"))
            parts.append(f"printf '\\n--- %s: runs\\n%s' {shlex.quote(block.where)} {shlex.quote(shown)}")
            parts.append(f"__qs_n={n}")
            parts.append("{\n" + block.text + f'}} >"$__qs_out/{n}.out" 2>&1 </dev/null')
            parts.append(f'cat "$__qs_out/{n}.out"')
    return "\n".join(parts) + "\n"


def check_output(block: Block, output: str) -> list[str]:
    """The block's `# →` lines that its output does not show, in order."""
    lines, at, missing = output.split("\n"), 0, []
    for want in block.expect:
        pieces = [p.strip() for p in want.split("…") if p.strip()]

        def shows(line: str) -> bool:
            pos = 0
            for piece in pieces:
                pos = line.find(piece, pos)
                if pos < 0:
                    return False
                pos += len(piece)
            return True

        found = next((k for k in range(at, len(lines)) if shows(lines[k])), None)
        if found is None:
            missing.append(want)
        else:
            at = found + 1
    return missing


def run(page: str, section: str, workdir: str, timeout: int) -> None:
    blocks = [b for b in parse(page) if b.section == section]
    active = [b for b in blocks if role(b) in ("run", "file")]
    if not any(role(b) == "run" for b in active):
        die(f"{page}: section {section!r} has no block to run")
    if os.listdir(workdir):
        die(f"{workdir} is not empty")
    meta = workdir.rstrip("/") + ".quickstart"
    os.makedirs(os.path.join(meta, "files"), exist_ok=True)
    body = script(blocks, os.path.join(meta, "files"), meta)
    with open(os.path.join(meta, "run.sh"), "w", encoding="utf-8") as f:
        f.write(body)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV" and not k.startswith("__qs")}
    proc = subprocess.Popen(
        ["bash", os.path.join(meta, "run.sh")], cwd=workdir, env=env, start_new_session=True
    )
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the section's own process group: bash and its children
        proc.wait()
        die(f"section {section!r}: still running after {timeout} s (the last block shown above)")
    if rc != 0:
        die(f"section {section!r}: the block shown last failed (exit status {rc})")
    failures = []
    for n, block in enumerate(blocks):
        if role(block) != "run" or not block.expect:
            continue
        with open(os.path.join(meta, f"{n}.out"), encoding="utf-8", errors="replace") as f:
            missing = check_output(block, f.read())
        failures += [f"{block.where}: printed nothing like `# → {want}`" for want in missing]
    if failures:
        die("\n  ".join([f"section {section!r} ran, but not as the page says:"] + failures))
    ran = sum(role(b) == "run" for b in blocks)
    files = sum(role(b) == "file" for b in blocks)
    checked = sum(len(b.expect) for b in blocks if role(b) == "run")
    print(f"\nquickstart {section!r}: {ran} blocks ran, {files} files written, {checked} outputs as the page says")


def copies(page: str, source: str) -> None:
    sources = {b.text for b in parse(source)}
    marked = [b for b in parse(page) if b.directive == f"from {source}"]
    if not marked:
        die(f"{page}: no block marked <!-- quickstart: from {source} -->")
    for block in marked:
        if block.text not in sources:
            die(f"{block.where}: this block is not, character for character, a block of {source}")
    print(f"{page}: {len(marked)} blocks, each a block of {source}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "sections":
        print("\n".join(sections(args[1])))
    elif len(args) in (4, 5) and args[0] == "run":
        run(args[1], args[2], args[3], int(args[4]) if len(args) == 5 else 600)
    elif len(args) == 3 and args[0] == "copies":
        copies(args[1], args[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
