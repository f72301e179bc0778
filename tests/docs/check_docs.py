#!/usr/bin/env python3
"""The docs hold: every relative link in README.md, CONTRIBUTING.md and
docs/**/*.md resolves (the file or folder exists; a #anchor names a heading
of the target page), every fenced block marked runnable runs, and the pages
keep their shape (README.md at most 200 lines, every other page at most 400,
no table cell over 400 characters; generated text is exempt: GENERATED).

A runnable block is a fenced block whose info string has the word
`runnable` after its language: ```bash runnable. More words are tags the
block needs (```bash runnable torch: hetccl_torch importable). Each block
runs on its own in a fresh scratch folder that holds links to the checkout's
top-level entries and to the build folder as `build`, so it reads as if run
from the checkout, under `bash -euo pipefail`, with the build's tools on
PATH (and, for torch blocks, the given python first on PATH and the
extension's folder on PYTHONPATH).

  check_docs.py --source SRC --build BUILD [--skip-tag TAG]... [--only-tag TAG]
                [--no-links] [--python PY] [--pythonpath DIR]
Exit status 0 pass, 1 fail, 2 usage.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
BLOCK_TIMEOUT_S = 120
MAX_LINES = {"README.md": 200}
MAX_LINES_OTHERS = 400
MAX_CELL = 400
# Tables made by a program: docs/settings.md's by hetccl-info --markdown (the
# registry's help texts). (The performance pages, made from the records by
# docs/perf/make_performance.py, are split to keep within the limit.)
GENERATED = {"docs/settings.md": "cells"}


def pages(source):
    """README.md, CONTRIBUTING.md and every .md under docs/, as paths relative to source."""
    out = [p for p in ("README.md", "CONTRIBUTING.md") if os.path.exists(os.path.join(source, p))]
    for root, dirs, files in os.walk(os.path.join(source, "docs")):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".md"):
                out.append(os.path.relpath(os.path.join(root, f), source))
    return out


def split(text):
    """(prose lines with their numbers, fenced blocks as (line, info, body))."""
    prose, blocks = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        fence, info, start = m.group(2), m.group(3).strip(), i
        body = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence[0] * len(fence)) and
                                      lines[i].strip().strip(fence[0]) == ""):
            body.append(lines[i])
            i += 1
        blocks.append((start + 1, info, "\n".join(body) + "\n"))
        i += 1
    return prose, blocks


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation out, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*_]{1,3}([^*_]+)[*_]{1,3}", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            prose, _ = split(f.read())
        seen, out = {}, set()
        for _, line in prose:
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
        cache[path] = out
    return cache[path]


def check_links(source):
    errors, count = [], 0
    for page in pages(source):
        path = os.path.join(source, page)
        with open(path, encoding="utf-8") as f:
            prose, _ = split(f.read())
        for lineno, line in prose:
            text = CODE_SPAN.sub("", line)
            targets = [m.group(1) for m in INLINE_LINK.finditer(text)]
            m = REF_LINK.match(text)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                count += 1
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                where = f"{page}:{lineno}: ({target})"
                if not os.path.exists(dest):
                    errors.append(f"{where}: {os.path.relpath(dest, source)} does not exist")
                elif not os.path.realpath(dest).startswith(os.path.realpath(source) + os.sep):
                    errors.append(f"{where}: leaves the checkout")
                elif anchor:
                    if os.path.isdir(dest) or not dest.endswith(".md"):
                        errors.append(f"{where}: an anchor into a file that is not a page")
                    elif anchor not in anchors(dest):
                        errors.append(f"{where}: no heading of {os.path.relpath(dest, source)} has the anchor "
                                      f"#{anchor}")
    return errors, count


def check_shape(source):
    errors = []
    for page in pages(source):
        with open(os.path.join(source, page), encoding="utf-8") as f:
            text = f.read()
        if GENERATED.get(page) == "page":
            continue
        n = text.count("\n")
        limit = MAX_LINES.get(page, MAX_LINES_OTHERS)
        if n > limit:
            errors.append(f"{page}: {n} lines, more than {limit}")
        if GENERATED.get(page) == "cells":
            continue
        prose, _ = split(text)
        for lineno, line in prose:
            if line.lstrip().startswith("|"):
                longest = max(len(c.strip()) for c in re.split(r"(?<!\\)\|", line))
                if longest > MAX_CELL:
                    errors.append(f"{page}:{lineno}: a table cell of {longest} characters, more than {MAX_CELL}")
    return errors


def runnable_blocks(source):
    for page in pages(source):
        with open(os.path.join(source, page), encoding="utf-8") as f:
            _, blocks = split(f.read())
        for lineno, info, body in blocks:
            words = info.split()
            if len(words) >= 2 and words[1] == "runnable":
                yield page, lineno, words[0], set(words[2:]), body


def run_block(source, build, page, lineno, lang, tags, body, args):
    scratch = tempfile.mkdtemp(prefix="hetccl-docs-")
    try:
        skip = {"build", ".git"}
        for entry in os.listdir(source):
            if entry not in skip and not entry.startswith("build"):
                os.symlink(os.path.join(source, entry), os.path.join(scratch, entry))
        os.symlink(build, os.path.join(scratch, "build"))
        env = dict(os.environ)
        path = [os.path.join(build, "tools")]
        if args.python:
            bindir = os.path.join(scratch, ".bin")
            os.mkdir(bindir)
            os.symlink(args.python, os.path.join(bindir, "python3"))
            path.insert(0, bindir)
        env["PATH"] = os.pathsep.join(path + [env.get("PATH", "")])
        if args.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join([args.pythonpath] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                                     else []))
        shell = {"bash": ["bash", "-euo", "pipefail"], "sh": ["bash", "-euo", "pipefail"]}.get(lang)
        if not shell:
            return f"{page}:{lineno}: a runnable block of '{lang}' (only bash and sh run)"
        script = os.path.join(scratch, ".block.sh")
        with open(script, "w") as f:
            f.write(body)
        t0 = time.monotonic()
        try:
            p = subprocess.run(shell + [script], cwd=scratch, env=env, capture_output=True, text=True,
                               timeout=BLOCK_TIMEOUT_S, start_new_session=True)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            return f"{page}:{lineno}: did not end within {BLOCK_TIMEOUT_S} s\n{out[-3000:]}"
        took = time.monotonic() - t0
        if p.returncode != 0:
            return f"{page}:{lineno}: exited {p.returncode}\n--- stdout\n{p.stdout[-3000:]}--- stderr\n{p.stderr[-3000:]}"
        print(f"ran {page}:{lineno} ({lang}{' ' + ' '.join(sorted(tags)) if tags else ''}) in {took:.1f} s")
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--skip-tag", action="append", default=[], help="leave out runnable blocks with this tag")
    ap.add_argument("--only-tag", help="run only the runnable blocks with this tag")
    ap.add_argument("--no-links", action="store_true", help="run the blocks only")
    ap.add_argument("--no-blocks", action="store_true",
                    help="check the pages only (a sanitizer build's library cannot be loaded by the blocks' programs)")
    ap.add_argument("--python", help="the python3 that runnable blocks find first on PATH")
    ap.add_argument("--pythonpath", help="a folder put first on PYTHONPATH for runnable blocks")
    args = ap.parse_args()
    source, build = os.path.abspath(args.source), os.path.abspath(args.build)
    args.python = args.python and os.path.abspath(args.python)
    args.pythonpath = args.pythonpath and os.path.abspath(args.pythonpath)
    errors = []
    if not args.no_links:
        link_errors, count = check_links(source)
        errors += link_errors
        print(f"{count} relative links in {len(pages(source))} pages, {len(link_errors)} broken")
        errors += check_shape(source)
    ran = 0
    for page, lineno, lang, tags, body in runnable_blocks(source):
        if args.no_blocks:
            print(f"left out {page}:{lineno} (--no-blocks)")
            continue
        if tags & set(args.skip_tag) or (args.only_tag and args.only_tag not in tags):
            print(f"left out {page}:{lineno} (tags: {' '.join(sorted(tags))})")
            continue
        err = run_block(source, build, page, lineno, lang, tags, body, args)
        ran += 1
        if err:
            errors.append(err)
    if args.only_tag and ran == 0:
        errors.append(f"no runnable block is tagged {args.only_tag}")
    for e in errors:
        print(f"check_docs: {e}")
    print(f"check_docs: {'FAILED' if errors else 'passed'} ({ran} runnable blocks run)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
