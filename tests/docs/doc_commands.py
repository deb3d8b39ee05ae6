#!/usr/bin/env python3
"""Runs the commands of README.md and the guides (docs/guides/*.md) as a user would.

Every fenced code block of those files is either run or accounted for:
  ```sh / ```bash      run with bash -e in one scratch directory per file, in file order;
                       there build/ is the build directory, configs/ and scripts/ the
                       repo's, SDP_DATA_DIR the data sets, Open MPI's root variables set
  ```python            run with python3
  ```yaml              checked with `sdp-train validate`, or written to a file (marker below)
  ```text, ```console, ```json   sample output or file contents: not run
An HTML comment on the line before a block changes that:
  <!-- doc-test: needs gpu|docker|cluster|sagemaker -->  not run: hardware CI lacks
  <!-- doc-test: needs mnist|cifar10|a9a -->  run where $SDP_DATA_DIR/<set> exists
  <!-- doc-test: ci -->         set-up lines: each &&-joined piece found in .ci/run is
                                checked there (CI runs it), the other pieces run
  <!-- doc-test: file NAME -->  the block is written to NAME in the scratch directory
Exit status 0 when every block ran or was accounted for, 1 otherwise.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HARDWARE = {"gpu", "docker", "cluster", "sagemaker"}
DATA_SETS = {"mnist", "cifar10", "a9a"}
RUN_LANGS = {"sh", "bash", "python"}
SHOWN_LANGS = {"text", "console", "json"}
BLOCK_TIMEOUT_S = 300

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
# A command in an indented block (outside a fence) would escape this check.
INDENTED_COMMAND = re.compile(r"^ {4,}(\$ )?(build/sdp-train|sdp-train|mpirun|srun|sbatch|bash |python3 |cmake |ctest )")


class Block:
    def __init__(self, path, line, lang, marker, text):
        self.path, self.line, self.lang, self.marker, self.text = path, line, lang, marker, text

    def where(self):
        return f"{self.path}:{self.line}"


def parse(path):
    """The fenced blocks of a markdown file, and the problems of its form."""
    blocks, problems = [], []
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if INDENTED_COMMAND.match(lines[i]):
                problems.append(f"{path}:{i + 1}: a command in an indented block; put it in a ```sh fence")
            i += 1
            continue
        start, lang = i, m.group(2)
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        marker = None
        if j >= 0:
            mm = MARKER.match(lines[j])
            if mm:
                marker = mm.group(1)
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(m.group(1)):] if lines[i].startswith(m.group(1)) else lines[i])
            i += 1
        if i == len(lines):
            problems.append(f"{path}:{start + 1}: a code fence that never closes")
        blocks.append(Block(path, start + 1, lang, marker, "\n".join(body) + "\n"))
        i += 1
    return blocks, problems


def split_and(text):
    """The &&-joined pieces of a one-command block (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", text).strip()
    return [p.strip() for p in joined.split("&&") if p.strip()]


class Runner:
    def __init__(self, args):
        self.source = os.path.abspath(args.source)
        self.build = os.path.abspath(args.build)
        self.data = os.path.abspath(args.data)
        self.ci_text = open(os.path.join(self.source, ".ci", "run")).read()
        self.failures = []
        self.counts = {"ran": 0, "checked in .ci/run": 0, "skipped": 0, "shown": 0}

    def env(self):
        env = dict(os.environ)
        env.update(SDP_DATA_DIR=self.data, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_mpi_yield_when_idle="1")
        return env

    def scratch(self):
        d = tempfile.mkdtemp(prefix="sdp-doc-")
        os.symlink(self.build, os.path.join(d, "build"))
        for name in ("configs", "scripts"):
            os.symlink(os.path.join(self.source, name), os.path.join(d, name))
        return d

    def report(self, block, status, detail=""):
        print(f"  {block.where():<40} {block.lang or '-':<7} {status}{(': ' + detail) if detail else ''}", flush=True)

    def fail(self, block, why, output=""):
        self.failures.append(f"{block.where()}: {why}")
        self.report(block, "FAILED", why)
        if output:
            tail = output[-3000:]
            print("    | " + tail.replace("\n", "\n    | "), flush=True)

    def execute(self, block, cwd, argv):
        start = time.monotonic()
        try:
            # stdin is /dev/null: mpirun reads its stdin, and would swallow a script fed there.
            p = subprocess.run(argv, cwd=cwd, env=self.env(), stdin=subprocess.DEVNULL, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            self.fail(block, f"still running after {BLOCK_TIMEOUT_S} s", (e.output or b"").decode(errors="replace")
                      if isinstance(e.output, bytes) else (e.output or ""))
            return False
        seconds = time.monotonic() - start
        if p.returncode != 0:
            self.fail(block, f"exit status {p.returncode}", p.stdout)
            return False
        self.counts["ran"] += 1
        self.report(block, f"ran in {seconds:.1f} s")
        return True

    def run_file(self, path):
        blocks, problems = parse(path)
        for p in problems:
            self.failures.append(p)
            print("  " + p)
        cwd = self.scratch()
        try:
            for block in blocks:
                self.run_block(block, cwd)
        finally:
            shutil.rmtree(cwd, ignore_errors=True)

    def run_block(self, block, cwd):
        marker = block.marker or ""
        words = marker.split()
        if words and words[0] == "needs":
            if len(words) != 2 or words[1] not in HARDWARE | DATA_SETS:
                return self.fail(block, f"unknown marker 'doc-test: {marker}' (needs one of "
                                        f"{', '.join(sorted(HARDWARE | DATA_SETS))})")
            if words[1] in HARDWARE:
                self.counts["skipped"] += 1
                return self.report(block, "not run", f"needs {words[1]}, which CI lacks")
            if not os.path.isdir(os.path.join(self.data, words[1])):
                self.counts["skipped"] += 1
                return self.report(block, "not run", f"no {words[1]} in {self.data} (set SDP_DATA_DIR)")
            marker = ""
        if marker.startswith("file "):
            name = marker[len("file "):].strip()
            if not name or "/" in name or name.startswith("."):
                return self.fail(block, f"'doc-test: file' needs a plain file name, not {name!r}")
            with open(os.path.join(cwd, name), "w") as f:
                f.write(block.text)
            self.counts["shown"] += 1
            return self.report(block, f"written to {name}")
        if marker == "ci":
            pieces = split_and(block.text)
            rest = [p for p in pieces if p not in self.ci_text]
            self.counts["checked in .ci/run"] += 1
            self.report(block, "checked in .ci/run", f"{len(pieces) - len(rest)} of {len(pieces)} piece(s)")
            if rest:
                return self.execute(block, cwd, ["bash", "-e", "-c", " && ".join(rest)])
            return True
        if marker:
            return self.fail(block, f"unknown marker 'doc-test: {marker}'")
        if block.lang in ("sh", "bash", "python"):
            script = os.path.join(cwd, ".doc-block")
            with open(script, "w") as f:
                f.write(block.text)
            shell = ["python3"] if block.lang == "python" else ["bash", "-e", "-o", "pipefail"]
            return self.execute(block, cwd, shell + [script])
        if block.lang == "yaml":
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=cwd, delete=False) as f:
                f.write(block.text)
            ok = self.execute(block, cwd, ["build/sdp-train", "validate", "--config", os.path.basename(f.name)])
            os.unlink(f.name)
            return ok
        if block.lang in SHOWN_LANGS:
            self.counts["shown"] += 1
            return True
        return self.fail(block, f"a ```{block.lang} block: say what it is (sh, python, yaml, text, console, json)")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="the build directory (holds sdp-train)")
    ap.add_argument("--source", default=source, help="the repository (default: this script's)")
    ap.add_argument("--data", default=os.environ.get("SDP_DATA_DIR", os.path.join(source, "..", "shared", "data")),
                    help="the data sets (default: $SDP_DATA_DIR, else ../shared/data)")
    ap.add_argument("files", nargs="*", help="markdown files (default: README.md and docs/guides/*.md)")
    args = ap.parse_args()
    files = args.files or [os.path.join(args.source, "README.md")] + sorted(
        os.path.join(args.source, "docs", "guides", f) for f in os.listdir(os.path.join(args.source, "docs", "guides"))
        if f.endswith(".md"))
    runner = Runner(args)
    for path in files:
        print(os.path.relpath(path, args.source) + ":", flush=True)
        runner.run_file(path)
    print(", ".join(f"{v} {k}" for k, v in runner.counts.items()))
    if runner.failures:
        print(f"{len(runner.failures)} problem(s):\n  " + "\n  ".join(runner.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
