#!/usr/bin/env python3
"""Generates the Lua scripts Redis runs and embeds them into C++, with the SHA1 Redis computes
for each (for EVALSHA) and the Redis commands each script calls (named in permission errors): a
header that declares them (lua_scripts.hpp) and a source that holds their texts (lua_scripts.cpp).
Why two files: the texts are over a megabyte, and only one translation unit compiles them.

Each algorithm is written once, in lua/algorithms/<name>.lua, as statement fragments:

  --!params a, b, c    the names its three integer fields take (ARGV, validated by the shape)
  --!checks ...        how its fields are validated, for the lean shape's error message
  --!needs <path>      a file of functions the algorithm calls (defined once per script)
  --!section decide    reads the state of `key` for `n` permits at `now`; sets allowed,
                       capacity, remaining, retry, reset and t (the time it used), which the
                       shape declares (false, 0, 0, 0, 0, now)
  --!section idle      for peek, after decide: sets reset to the time until idle from the
                       state now
                       Every section also sees the policy epoch: pv (the request's policy
                       version), since (when the policy took effect, resolved: at most now),
                       sent_since (since as the request sent it) and carry (0 as_is, 1
                       proportional, 2 reset); each reads its state's stamp with
                       lib/stamp_rule.lua. decide (and reserve, cancel) may set
                       `stale = <stored pv>` (the shape refuses the request before any write)
                       and `rewrite = true` (the state was restamped, and carried over: write it
                       back even when denied)
  --!section write     after decide, when allowed or rewriting: writes the new state holding
                       `taken` permits more (n when allowed, 0 when rewriting a denial), with
                       its stamp, and a TTL until the written state is idle
  --!section adjust    (shapes/adjust.lua) refund, penalize or block `key`: `op` is 'refund'
                       or 'penalize' (`n` permits) or 'block' (until `until_us`); sets
                       `refused` to a reason (nothing is written), or `apply` to a function that
                       writes the adjusted state (called once every limit has agreed)
  --!section reserve   (gcra, leaky_bucket, token_bucket) for acquire(): as decide, but admits
                       the permits at the earliest slot they fit if the wait is within max_wait,
                       and also sets wait, slot and slot_f; write follows when allowed (or
                       rewriting)
  --!section cancel    (with reserve) gives a pending reservation's permits back: sets verdict
                       and, when returned, shift, shift_f and shift_p, and writes
  --!part <name>       a named piece of the sections, written once: a line `--!use <name>` in
                       a section or part stands for it (as does `--!use <section>`)

Its leading comment is its documentation (--!doc). A shape (lua/shapes/<shape>.lua) is a
template that places the sections: `--!section <name>` (indented as the marker is),
`--!each-algorithm` ... `--!end` (once per algorithm), `--!needs`, `--!doc`, and the words
@ALG@, @PARAMS@ and @CHECKS@. A shape with the line `--!defines-no-function` is checked to
define no function but those its algorithms need. Fragments are statements, not functions, so
that a lean shape defines no function per call (EVALSHA re-creates every local function on
every call), and so that a shape that decides many requests in one call can loop over them.

A line `--!include <path>` is replaced by that file (relative to the including file's folder).

Exact integer division is written once, here, and expanded inline, as a whole statement:
  [local] q = IDIV(a, b)       floor(a / b) for integers a >= 0, b > 0
  [local] q = CEIL_DIV(a, b)   ceil(a / b), as floor((a + b - 1) / b)
become `q = floor(a / b)` and a line that corrects the double quotient by one either way (it
can round up to the next integer when it is very close to it).

Scripts are named on the command line: `name=shapes/lean.lua:gcra` (a shape and its
algorithms, comma-separated), a plain `path.lua` (named after the file), or
`name=batch.lua+decide,reserve` (a batch: the scripts named before it, each as a function under
its index, where the template says --!scripts, with their TIME calls read once per batch; and,
where it says --!runs, shapes/lean_run.lua rendered for the algorithm of every one of them made
in the lean shape, with @INDEX@ its index)."""
import argparse
import hashlib
import pathlib
import re

CALL = re.compile(r"redis\.p?call\(\s*['\"]([A-Za-z|]+)['\"]")
MACRO_LINE = re.compile(r"^(\s*)(local\s+)?([A-Za-z_]\w*)\s*=\s*(IDIV|CEIL_DIV)\(")
SIMPLE = re.compile(r"[\w.]+")
SECTIONS = ("decide", "idle", "write", "adjust")
RESERVATION_SECTIONS = ("reserve", "cancel")


def fail(message):
    raise SystemExit(f"embed.py: {message}")


def identifier(name, where):
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        fail(f"script name must be snake_case: {where}")
    return name


def expand_includes(path, seen=()):
    path = pathlib.Path(path).resolve()
    if path in seen:
        fail(f"include cycle through {path}")
    lines = []
    for line in path.read_text().splitlines(keepends=True):
        if line.lstrip().startswith("--!include "):
            indent = line[: len(line) - len(line.lstrip())]
            included = path.parent / line.strip()[len("--!include "):]
            lines += [indent + l if l.strip() else l
                      for l in expand_includes(included, seen + (path,))]
        else:
            lines.append(line)
    return lines


def split_arguments(text, where):
    """The two comma-separated arguments of a macro call and what follows its ')'."""
    depth, args, current = 0, [], ""
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                args.append(current.strip())
                if len(args) != 2:
                    fail(f"{where}: a division macro takes two arguments")
                return args, text[i + 1:]
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
            continue
        current += ch
    fail(f"{where}: unbalanced division macro")


def parenthesized(expression):
    return expression if SIMPLE.fullmatch(expression) else f"({expression})"


def expand_macros(lines, where):
    out = []
    for number, line in enumerate(lines, 1):
        match = MACRO_LINE.match(line)
        if not match:
            if "IDIV(" in line or "CEIL_DIV(" in line:
                fail(f"{where}:{number}: a division macro must be a whole assignment")
            out.append(line)
            continue
        indent, local, target, macro = match.groups()
        (a, b), rest = split_arguments(line[match.end():], f"{where}:{number}")
        rest = rest.strip()
        if rest and not rest.startswith("--"):
            fail(f"{where}:{number}: nothing may follow a division macro but a comment")
        if re.search(rf"\b{target}\b", a + " " + b):
            fail(f"{where}:{number}: {target} is both the target and an argument")
        if macro == "CEIL_DIV":
            a = f"{a} + {int(b) - 1}" if b.isdigit() else f"{a} + {parenthesized(b)} - 1"
        a, b = parenthesized(a), parenthesized(b)
        comment = f"  {rest}" if rest else ""
        out.append(f"{indent}{local or ''}{target} = floor({a} / {b}){comment}\n")
        down = f"if {target} * {b} > {a} then {target} = {target} - 1"
        up = f"elseif ({target} + 1) * {b} <= {a} then {target} = {target} + 1 end"
        if len(indent) + len(down) + 1 + len(up) <= 100:
            out.append(f"{indent}{down} {up}\n")
        else:
            out += [f"{indent}{down}\n", f"{indent}{up}\n"]
    return out


class Algorithm:
    """One algorithm's file: its documentation, fields, needs and sections."""

    def __init__(self, root, name):
        self.name = name
        path = root / "algorithms" / f"{name}.lua"
        self.doc, self.params, self.checks, self.needs = [], None, None, []
        self.sections, self.parts = {}, {}
        section = None
        for line in expand_includes(path):
            stripped = line.strip()
            if stripped.startswith("--!params "):
                self.params = stripped[len("--!params "):]
            elif stripped.startswith("--!checks "):
                self.checks = stripped[len("--!checks "):]
            elif stripped.startswith("--!needs "):
                self.needs.append((path.parent / stripped[len("--!needs "):]).resolve())
            elif stripped.startswith("--!section "):
                name = stripped[len("--!section "):]
                if name not in SECTIONS + RESERVATION_SECTIONS or name in self.sections:
                    fail(f"{path}: unknown or repeated section {name}")
                section = self.sections[name] = []
            elif stripped.startswith("--!part "):
                name = stripped[len("--!part "):]
                if name in self.parts or name in SECTIONS + RESERVATION_SECTIONS:
                    fail(f"{path}: repeated part {name}")
                section = self.parts[name] = []
            elif section is not None:
                section.append(line)
            elif stripped.startswith("--"):
                self.doc.append(line)
        reservations = set(self.sections) - set(SECTIONS)
        if (self.params is None or self.checks is None or not set(SECTIONS) <= set(self.sections)
                or reservations not in (set(), set(RESERVATION_SECTIONS))):
            fail(f"{path}: needs --!params, --!checks and the sections {', '.join(SECTIONS)} "
                 f"(and {' and '.join(RESERVATION_SECTIONS)}, or neither)")
        for lines in list(self.sections.values()) + list(self.parts.values()):
            while lines and not lines[-1].strip():
                lines.pop()
        for name in self.parts:
            self.parts[name] = self.expand_uses(self.parts[name], path, (name,))
        for name in self.sections:
            self.sections[name] = self.expand_uses(self.sections[name], path, (name,))

    def expand_uses(self, lines, path, within):
        """The lines with each `--!use <name>` replaced by that part or section, indented."""
        out = []
        for line in lines:
            stripped = line.strip()
            if not stripped.startswith("--!use "):
                out.append(line)
                continue
            name = stripped[len("--!use "):]
            used = self.parts.get(name, self.sections.get(name))
            if used is None or name in within:
                fail(f"{path}: --!use {name}: no such part or section, or a cycle")
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + l if l.strip() else l
                    for l in self.expand_uses(used, path, within + (name,))]
        return out

    def section(self, name, where):
        if name not in self.sections:
            fail(f"{where}: {self.name} has no section {name}")
        return self.sections[name]


def fill(line, algorithm):
    if algorithm is None:
        if "@" in line and re.search(r"@(ALG|PARAMS|CHECKS)@", line):
            fail("@ALG@, @PARAMS@ and @CHECKS@ need one algorithm")
        return line
    return (line.replace("@ALG@", algorithm.name).replace("@PARAMS@", algorithm.params)
            .replace("@CHECKS@", algorithm.checks))


def code(lines):
    """The lines without their comments (good enough for Lua written as in lua/)."""
    return [line.split("--", 1)[0] for line in lines]


def check_no_function(shape_lines, rendered, algorithms, where):
    if not any(line.strip() == "--!defines-no-function" for line in shape_lines):
        return
    needed = [l for a in algorithms for n in dict.fromkeys(a.needs) for l in expand_includes(n)]
    count = lambda lines: sum(len(re.findall(r"\bfunction\b", l)) for l in code(lines))
    if count(rendered) != count(needed):
        fail(f"{where}: the shape defines no function, but the script defines "
             f"{count(rendered) - count(needed)} beyond its needs")


def render(lines, algorithms, current):
    """The shape's lines with its markers replaced, for `current` (one algorithm) or none."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped == "--!each-algorithm":
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "--!end"), None)
            if end is None:
                fail("--!each-algorithm without --!end")
            for algorithm in algorithms:
                out += render(lines[i + 1:end], algorithms, algorithm)
            i = end + 1
            continue
        if stripped == "--!needs":
            needed = list(dict.fromkeys(n for a in algorithms for n in a.needs))
            for path in needed:
                out += expand_includes(path)
        elif stripped == "--!defines-no-function":
            pass
        elif stripped == "--!doc":
            if current is None:
                fail("--!doc needs one algorithm")
            out += [indent + l if l.strip() else l for l in current.doc]
        elif stripped.startswith("--!section "):
            if current is None:
                fail("--!section needs one algorithm")
            out += [indent + l if l.strip() else l
                    for l in current.section(stripped[len("--!section "):], "a shape")]
        else:
            out.append(fill(line, current))
        i += 1
    return out


TIME_CALL = re.compile(r"redis\.call\(\s*['\"]TIME['\"]\s*\)")
COMMAND_CALL = re.compile(r"redis\.call\(")


LEAN_SHAPE, LEAN_RUN_SHAPE = "shapes/lean.lua", "shapes/lean_run.lua"


def uncommented(lines):
    """The lines without comment lines and blank lines, each ending in a newline."""
    return [l.rstrip("\n") + "\n" for l in lines if l.strip() and not l.lstrip().startswith("--")]


def lean_runs(root, wrapped, generated):
    """The lines that define RUNS[index] for every script in `wrapped` made in the lean shape:
    LEAN_RUN_SHAPE rendered for its algorithm, calling Redis through its argument CALL."""
    shape_lines = expand_includes(root / LEAN_RUN_SHAPE)
    out = []
    for name in wrapped:
        index, _, algorithm = generated[name]
        if algorithm is None:
            continue
        for need in algorithm.needs:
            # Why: a needed function is defined outside the run function, where CALL is not.
            if "redis.call(" in "".join(code(expand_includes(need))):
                fail(f"batch: {algorithm.name} needs {need}, which calls Redis")
        lines = render(shape_lines, [algorithm], algorithm)
        out += [COMMAND_CALL.sub("CALL(", l.replace("@INDEX@", str(index)))
                for l in uncommented(lines)]
        # Why: the batch answers a run whose first command reads its key's value from what a
        # call like it decided on that value (DECIDED in lua/batch.lua).
        commands = CALL.findall("".join(code(lines)))
        if commands and commands[0] == "GET":
            out.append(f"VALUE_RUNS[{index}] = true\n")
    return out


def batch(root, template, wrapped, generated):
    """The lines of a batch script: `template` with its --!scripts line replaced by every
    script in `wrapped` (names of scripts generated before it) as a function of (KEYS, ARGV)
    under its index, reading the batch's one TIME and calling commands through BATCH_CALL, and
    its --!runs line by the lean run functions (lean_runs)."""
    out = []
    for name in wrapped:
        if name not in generated:
            fail(f"batch: {name} must be named before the batch")
    for line in expand_includes(root / template):
        if line.strip() == "--!runs":
            out += lean_runs(root, wrapped, generated)
            continue
        if line.strip() != "--!scripts":
            out.append(line)
            continue
        for name in wrapped:
            index, text, _ = generated[name]
            if "redis.pcall(" in text:
                fail(f"batch: {name} calls redis.pcall, which BATCH_CALL does not stand for")
            out.append(f"-- {name}\n")
            out.append(f"SCRIPTS[{index}] = function(KEYS, ARGV)\n")
            # Why without comment lines: each script keeps its own; here they would only
            # make Redis read the batch's text once more per script.
            out += [COMMAND_CALL.sub("BATCH_CALL(", TIME_CALL.sub("BATCH_TIME()", l))
                    for l in uncommented(text.splitlines())]
            out.append("end\n")
    return out


def generate(root, spec, generated):
    """(name, text, algorithm) of one script named on the command line (algorithm: the
    Algorithm of a script in the lean shape, else None); `generated` maps the names of the
    scripts before it to (index, text, algorithm)."""
    lean = None
    if "=" in spec and "+" in spec:
        name, rest = spec.split("=", 1)
        template, _, wrapped = rest.partition("+")
        lines = batch(root, template, [w for w in wrapped.split(",") if w], generated)
    elif "=" in spec:
        name, shape = spec.split("=", 1)
        shape, _, names = shape.partition(":")
        algorithms = [Algorithm(root, a) for a in names.split(",") if a]
        current = algorithms[0] if len(algorithms) == 1 else None
        shape_lines = expand_includes(root / shape)
        lines = render(shape_lines, algorithms, current)
        check_no_function(shape_lines, lines, algorithms, name)
        if shape == LEAN_SHAPE:
            lean = current
    else:
        name = pathlib.Path(spec).stem
        lines = expand_includes(root / spec)
    identifier(name, spec)
    return name, "".join(expand_macros(lines, name)), lean


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--header", required=True, help="the declarations (lua_scripts.hpp)")
    parser.add_argument("--source", required=True, help="the scripts' texts (lua_scripts.cpp)")
    parser.add_argument("--root", required=True, help="the lua/ folder")
    parser.add_argument("scripts", nargs="+")
    args = parser.parse_args()
    root = pathlib.Path(args.root)

    header = [
        "// Generated by lua/embed.py from lua/*.lua at build time. Do not edit.",
        "#pragma once",
        "#include <array>",
        "",
        '#include "redis/script_source.hpp"',
        "",
        "namespace redlimit::detail::scripts {",
        "",
    ]
    source = [
        "// Generated by lua/embed.py from lua/*.lua at build time. Do not edit.",
        '#include "lua_scripts.hpp"',
        "",
        "#include <string_view>",
        "",
        "namespace redlimit::detail::scripts {",
        "namespace {",
        "",
    ]
    definitions = []
    names = []
    generated = {}
    for index, spec in enumerate(args.scripts):
        name, text, lean = generate(root, spec, generated)
        generated[name] = (index, text, lean)
        data = text.encode()
        names.append(name)
        sha1 = hashlib.sha1(data).hexdigest()
        called = set(CALL.findall(text))
        if "+" in spec:  # a batch calls what its scripts call (through BATCH_CALL)
            for wrapped in spec.split("+", 1)[1].split(","):
                called |= set(CALL.findall(generated[wrapped][1]))
        commands = " ".join(sorted({c.upper() for c in called}))
        body = ",".join(f"0x{b:02x}" for b in data)
        header.append(f"extern const ScriptSource {name};")
        source.append(f"constexpr char {name}_bytes[] = {{{body}}};")
        definitions.append(
            f"constinit const ScriptSource {name}{{\"{name}\", "
            f"std::string_view({name}_bytes, {len(data)}), \"{sha1}\", \"{commands}\", {index}}};")
    all_type = f"std::array<const ScriptSource*, {len(names)}>"
    header += [
        "",
        "/// Every script, at its index.",
        f"extern const {all_type} all;",
        "",
        "}  // namespace redlimit::detail::scripts",
        "",
    ]
    source += ["", "}  // namespace", ""] + definitions + [
        "",
        f"constinit const {all_type} all{{" + ", ".join(f"&{n}" for n in names) + "};",
        "",
        "}  // namespace redlimit::detail::scripts",
        "",
    ]
    pathlib.Path(args.header).write_text("\n".join(header))
    pathlib.Path(args.source).write_text("\n".join(source))


if __name__ == "__main__":
    main()
