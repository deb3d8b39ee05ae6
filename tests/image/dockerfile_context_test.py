#!/usr/bin/env python3
"""Does each build step of a Dockerfile find what it reads? Needs no Docker daemon.

    dockerfile_context_test.py SOURCE_DIR DOCKERFILE

Walks the Dockerfile as `docker build` would (stages, ARG and ENV values, WORKDIR, COPY with
.dockerignore applied) and, at each RUN that configures the project with CMake, lays out in a
temporary directory exactly what the stage has copied so far and runs that CMake configure
there. Each RUN that starts a script of the tree (`bash scripts/x.sh`) must also find it copied.
Fails naming the file a step needs and the line where the Dockerfile copies it too late, or
that it never copies it. Exit 0 when every step finds its files, 1 otherwise.
"""
import fnmatch
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile


def logical_lines(path):
    """(first line number, instruction text) with continuation lines joined, comments dropped."""
    start, parts = None, []
    for number, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.rstrip("\n")
        if not parts and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if parts and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if start is None:
            start = number
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        parts.append(line)
        yield start, " ".join(p.strip() for p in parts)
        start, parts = None, []


def dockerignore_patterns(source):
    path = os.path.join(source, ".dockerignore")
    if not os.path.exists(path):
        return []
    patterns = []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("#"):
            patterns.append(line.lstrip("/").rstrip("/"))
    return patterns


def ignored(relative, patterns):
    """Docker's rule, enough for this tree: a path is out when it or a folder above it matches."""
    pieces = relative.split("/")
    for i in range(1, len(pieces) + 1):
        prefix = "/".join(pieces[:i])
        for pattern in patterns:
            if pattern.startswith("!"):
                continue
            if fnmatch.fnmatchcase(prefix, pattern):
                return True
            if pattern.startswith("**/") and fnmatch.fnmatchcase(pieces[i - 1], pattern[3:]):
                return True
    return False


def expand(text, values):
    """${NAME}, ${NAME:-default} and $NAME from the ARG and ENV values known at this point."""
    def one(match):
        name = match.group(1) or match.group(3)
        default = match.group(2)
        value = values.get(name)
        return value if value not in (None, "") else (default or "")
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)", one, text)


def parse_assignments(text):
    """ARG/ENV bodies: NAME=VALUE pairs (quoted or not), or the older `ENV NAME VALUE`."""
    words = shlex.split(text)
    if len(words) >= 2 and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict((w.split("=", 1) + [None])[:2] for w in words)


class Stage:
    def __init__(self, name, values):
        self.name = name
        self.values = dict(values)
        self.workdir = "/"
        # Path in the image (absolute) -> (source path relative to the context, Dockerfile line).
        self.copied = {}


def copy_into(stage, source, patterns, srcs, dest, line):
    """Records what `COPY srcs dest` puts into the stage, file by file."""
    dest = dest if dest.startswith("/") else os.path.join(stage.workdir, dest)
    matches = []
    for pattern in srcs:
        matches += sorted(glob.glob(os.path.join(source, pattern)))
    into_folder = dest.endswith("/") or len(srcs) > 1
    for match in matches:
        relative = os.path.relpath(match, source)
        if ignored(relative, patterns):
            continue
        if os.path.isdir(match):
            for folder, _, files in os.walk(match):
                for name in files:
                    path = os.path.join(folder, name)
                    inner = os.path.relpath(path, source)
                    if not ignored(inner, patterns):
                        stage.copied[os.path.normpath(os.path.join(dest, os.path.relpath(path, match)))] = (inner, line)
        else:
            target = os.path.join(dest, os.path.basename(match)) if into_folder else dest
            stage.copied[os.path.normpath(target)] = (relative, line)


def lay_out(stage, source, root):
    for target, (relative, _) in stage.copied.items():
        path = os.path.join(root, target.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy2(os.path.join(source, relative), path)


def first_copy_line(dockerfile, relative_target, after):
    """The line of a COPY at or after `after` whose sources include the context path."""
    for number, text in logical_lines(dockerfile):
        if number <= after:
            continue
        match = re.match(r"COPY\s+(?!--from)(.+)", text, re.I)
        if not match:
            continue
        *srcs, _ = match.group(1).split()
        for src in srcs:
            src = src.rstrip("/")
            if relative_target == src or relative_target.startswith(src + "/") or fnmatch.fnmatchcase(relative_target, src):
                return number
    return None


def configure_command(run_text, values):
    """The `cmake -S ...` configure of a RUN line (up to its first &&), expanded, or None."""
    for part in run_text.split("&&"):
        words = shlex.split(expand(part, values))
        if len(words) >= 2 and words[0] == "cmake" and "-S" in words:
            return words
    return None


def missing_paths(output, root, workdir):
    """Paths under the laid-out tree that CMake looked for and did not find."""
    found = []
    for path in re.findall(re.escape(root) + r"[^\s\"':]*", output):
        if not os.path.exists(path) and path not in found:
            found.append(path)
    relative = []
    for path in found:
        inside = os.path.relpath(path, os.path.join(root, workdir.lstrip("/")))
        if not inside.startswith("../build") and not inside.startswith("build/"):
            relative.append(inside)
    return relative


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    source = os.path.abspath(sys.argv[1])
    dockerfile = sys.argv[2] if os.path.isabs(sys.argv[2]) else os.path.join(source, sys.argv[2])
    name = os.path.relpath(dockerfile, source)
    patterns = dockerignore_patterns(source)
    global_args, stage, failures, checked = {}, None, [], 0
    for number, text in logical_lines(dockerfile):
        keyword, _, rest = text.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        values = stage.values if stage else global_args
        if keyword == "ARG":
            for key, value in parse_assignments(rest).items():
                # An ARG inside a stage without a value takes the global one.
                values[key] = value if value is not None else global_args.get(key)
        elif keyword == "FROM":
            words = rest.split()
            stage = Stage(words[2] if len(words) >= 3 and words[1].upper() == "AS" else None, {})
        elif stage is None:
            continue
        elif keyword == "ENV":
            stage.values.update({k: expand(v or "", stage.values) for k, v in parse_assignments(rest).items()})
        elif keyword == "WORKDIR":
            stage.workdir = os.path.normpath(os.path.join(stage.workdir, expand(rest, stage.values)))
        elif keyword == "COPY" and not rest.startswith("--from"):
            words = [w for w in expand(rest, stage.values).split() if not w.startswith("--")]
            copy_into(stage, source, patterns, words[:-1], words[-1], number)
        elif keyword == "RUN":
            # A script of the tree that the step starts must be in the image by then.
            for script in re.findall(r"(?:^|[\s;&|])(?:bash|sh)\s+([\w./-]+)", rest):
                target = os.path.normpath(os.path.join(stage.workdir, script))
                relative = os.path.relpath(target, stage.workdir)
                if target not in stage.copied and os.path.exists(os.path.join(source, relative)):
                    later = first_copy_line(dockerfile, relative, number)
                    failures.append(f"{name}:{number}: RUN starts {relative}, which the Dockerfile "
                                    + (f"copies only later (line {later})" if later else "never copies"))
            command = configure_command(rest, stage.values)
            if not command:
                continue
            checked += 1
            failures += check_configure(name, dockerfile, source, stage, number, command)
    if checked == 0:
        failures.append(f"{name}: no RUN step configures the project with `cmake -S` (nothing checked)")
    for failure in failures:
        print("FAIL " + failure)
    if not failures:
        print(f"PASS {name}: each of its {checked} CMake configure steps configures from what the file copies before it")
    return 1 if failures else 0


def check_configure(name, dockerfile, source, stage, number, command):
    root = tempfile.mkdtemp(prefix="dockerfile-context-")
    try:
        lay_out(stage, source, root)
        cwd = os.path.join(root, stage.workdir.lstrip("/"))
        os.makedirs(cwd, exist_ok=True)
        notes = []
        # The step's CUDA compiler lives in the image; where this machine has none at that
        # path the configure is checked without the CUDA backend (the same files are read
        # but the .cu sources, which the copies bring with lib/).
        for i, word in enumerate(command):
            if word.startswith("-DCMAKE_CUDA_COMPILER=") and not os.path.exists(word.split("=", 1)[1]):
                notes.append(f"no {word.split('=', 1)[1]} here: configured with -DSDP_WITH_CUDA=OFF")
        if notes:
            command = [w for w in command if not w.startswith(("-DCMAKE_CUDA_COMPILER=", "-DCUDAToolkit_ROOT="))]
            command = [("-DSDP_WITH_CUDA=OFF" if w.startswith("-DSDP_WITH_CUDA=") else w) for w in command]
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
        shown = f"{name}:{number}: `{' '.join(command)}`" + (f" ({'; '.join(notes)})" if notes else "")
        if result.returncode == 0:
            print(f"ok {shown}: configures from the {len(stage.copied)} files copied before it")
            return []
        output = result.stdout + result.stderr
        failures = []
        for relative in missing_paths(output, root, stage.workdir):
            if os.path.exists(os.path.join(source, relative)):
                later = first_copy_line(dockerfile, relative, number)
                failures.append(f"{name}:{number}: the build step needs {relative}, which the Dockerfile "
                                + (f"copies only after it (line {later})" if later else "does not copy before it"))
            else:
                failures.append(f"{name}:{number}: the build step needs {relative}, which is not in the tree")
        if not failures:
            errors = [l.strip() for l in output.splitlines() if "Error" in l or "error" in l][:5]
            failures.append(f"{shown} failed: " + " | ".join(errors or output.strip().splitlines()[-5:]))
        return failures
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
