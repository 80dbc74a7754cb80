#!/usr/bin/env python3
"""Writes modelc's man page and its bash, zsh and fish completions from what the CLI prints.

    Scripts/cli-docs.py MODELC OUTDIR

runs `MODELC --help`, `MODELC --version` and `MODELC help COMMAND` for every command the
top-level help lists, and writes into OUTDIR:

    modelc.1     the man page: help2man over --help and --version, with a section holding
                 each command's own help
    modelc.bash  bash completion (share/bash-completion/completions/modelc)
    _modelc      zsh completion (a directory on fpath)
    modelc.fish  fish completion (share/fish/vendor_completions.d)

The CLI's argument parser is modelc's own (Sources/ArgumentParsing), so the help text is the
one description of the commands there is: a command or option added to the parser appears here
at the next install with nothing else to edit. `make install` runs this over the installed binary.
"""
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Option:
    long: str
    short: str = ""
    value: str = ""  # the value's name, "" for a flag
    description: str = ""

    @property
    def repeatable(self) -> bool:
        return "(repeatable)" in self.description


@dataclass
class Argument:
    name: str
    description: str
    optional: bool = False
    variadic: bool = False


@dataclass
class Command:
    name: str
    summary: str
    help_text: str = ""
    arguments: list = field(default_factory=list)
    options: list = field(default_factory=list)


def run(modelc, *arguments):
    result = subprocess.run([modelc, *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("cli-docs: '%s %s' exited with %d: %s" % (modelc, " ".join(arguments), result.returncode,
                                                           result.stderr.strip()))
    return result.stdout


def sections(text):
    """The help's `HEADING:` blocks as {heading: [(left, description)]}, entries indented by two."""
    found, current = {}, None
    for line in text.splitlines():
        heading = re.match(r"^([A-Z][A-Z ]*):\s*$", line)
        if heading:
            current = found.setdefault(heading.group(1), [])
            continue
        if current is None or not line.strip():
            continue
        entry = re.match(r"^  (\S.*?)(?:  +(\S.*))?$", line)
        if entry and not line.startswith("   "):
            current.append([entry.group(1), entry.group(2) or ""])
        elif current and line.startswith("   "):  # a description wrapped onto the next line
            current[-1][1] = (current[-1][1] + " " + line.strip()).strip()
        else:  # text at the margin ends the block
            current = None
    return found


def parse_option(left, description):
    match = re.match(r"^(?:(-[A-Za-z0-9]), )?(--[A-Za-z0-9][A-Za-z0-9-]*)(?: (.+))?$", left)
    if not match:
        match = re.match(r"^(-[A-Za-z0-9])()(?: (.+))?$", left)
        if not match:
            sys.exit("cli-docs: cannot read the option line %r" % left)
        return Option(long="", short=match.group(1), value=match.group(3) or "", description=description)
    return Option(long=match.group(2), short=match.group(1) or "", value=match.group(3) or "", description=description)


def parse_command(modelc, name, summary):
    text = run(modelc, "help", name)
    command = Command(name=name, summary=summary, help_text=text)
    found = sections(text)
    usage = re.search(r"^USAGE: (.*)$", text, re.M)
    usage_words = usage.group(1).split() if usage else []
    for left, description in found.get("ARGUMENTS", []):
        argument = Argument(name=left, description=description)
        argument.optional = "[%s]" % left in usage_words or "[%s...]" % left in usage_words
        argument.variadic = any(word.strip("[]") == left + "..." for word in usage_words)
        command.arguments.append(argument)
    command.options = [parse_option(left, description) for left, description in found.get("OPTIONS", [])]
    return command


def choices(description):
    """Words a value can take, when its description is a plain list: 'list, verify, prune or path.'."""
    text = description.rstrip(".")
    if ": " in text:
        text = text.rsplit(": ", 1)[1]
    words = [word.strip() for word in re.split(r",\s*|\s+or\s+", text)]
    if words and all(re.fullmatch(r"[a-z][a-z0-9-]*", word) for word in words):
        return words
    return []


def value_kind(name, description, commands):
    """How a value is completed: ('dirs',), ('files',), ('words', [...]) or ('none',)."""
    bare = name.strip("'\"")
    if bare == "COMMAND":
        return ("words", commands)
    if bare == "DIR" or bare.endswith("_DIR"):
        return ("dirs",)
    if bare in {"FILE", "PATH", "MODEL", "BUNDLE", "SOURCE", "OUTPUT", "IMAGE", "MANIFEST"} \
            or bare.startswith("OUT") or "." in bare:
        return ("files",)
    words = choices(description)
    if words:
        return ("words", words)
    return ("none",)


# bash


def bash_action(kind):
    if kind[0] == "files":
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))'
    if kind[0] == "dirs":
        return 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur"))'
    if kind[0] == "words":
        return 'COMPREPLY=($(compgen -W "%s" -- "$cur"))' % " ".join(kind[1])
    return "COMPREPLY=()"


def bash(commands, top_options):
    names = [command.name for command in commands]
    lines = [
        "# bash completion for modelc; generated by Scripts/cli-docs.py from `modelc --help`.",
        "_modelc() {",
        '    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}',
        "    if [ \"$COMP_CWORD\" -eq 1 ]; then",
        '        COMPREPLY=($(compgen -W "%s" -- "$cur"))' % " ".join(names + top_options),
        "        return",
        "    fi",
        "    local options='' valued='' kinds=() variadic=0",
        '    case ${COMP_WORDS[1]} in',
    ]
    for command in commands:
        flags = [name for option in command.options for name in (option.short, option.long) if name]
        valued = [name for option in command.options if option.value for name in (option.short, option.long) if name]
        lines.append("    %s)" % command.name)
        lines.append("        options='%s' valued=' %s '" % (" ".join(flags), " ".join(valued)))
        value_cases = [(option, value_kind(option.value, option.description, names))
                       for option in command.options if option.value]
        if value_cases:
            lines.append('        case $prev in')
            for option, kind in value_cases:
                lines.append("        %s) %s; return ;;" % ("|".join(n for n in (option.short, option.long) if n),
                                                          bash_action(kind)))
            lines.append("        esac")
        lines.append("        kinds=(%s) variadic=%d ;;" % (
            " ".join("'%s'" % bash_action(value_kind(a.name, a.description, names)).replace("'", "'\\''")
                     for a in command.arguments),
            1 if any(a.variadic for a in command.arguments) else 0))
    lines += [
        "    *) return ;;",
        "    esac",
        '    if [[ $cur == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$options" -- "$cur"))',
        "        return",
        "    fi",
        "    # Which argument the cursor is on: words that are neither options nor option values.",
        "    local index=0 skip=0 i",
        "    for ((i = 2; i < COMP_CWORD; i++)); do",
        "        if [ $skip -eq 1 ]; then skip=0; continue; fi",
        '        case ${COMP_WORDS[i]} in',
        '        -*) [[ $valued == *" ${COMP_WORDS[i]} "* ]] && skip=1 ;;',
        "        *) index=$((index + 1)) ;;",
        "        esac",
        "    done",
        "    [ ${#kinds[@]} -eq 0 ] && return",
        "    if [ $index -ge ${#kinds[@]} ]; then",
        "        [ $variadic -eq 1 ] || return",
        "        index=$((${#kinds[@]} - 1))",
        "    fi",
        '    eval "${kinds[index]}"',
        "}",
        "complete -F _modelc modelc",
        "",
    ]
    return "\n".join(lines)


# zsh


def zsh_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def zsh_description(text):
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def zsh_action(kind):
    if kind[0] == "files":
        return "_files"
    if kind[0] == "dirs":
        return "_files -/"
    if kind[0] == "words":
        return "(%s)" % " ".join(kind[1])
    return " "


def zsh(commands, top_options):
    names = [command.name for command in commands]
    lines = [
        "#compdef modelc",
        "# zsh completion for modelc; generated by Scripts/cli-docs.py from `modelc --help`.",
        "_modelc() {",
        "    local curcontext=$curcontext state line",
        "    local -a commands",
        "    commands=(",
    ]
    lines += ["        %s" % zsh_quote("%s:%s" % (c.name, c.summary.replace(":", "\\:"))) for c in commands]
    lines += [
        "    )",
        "    _arguments -C \\",
        "        '(- *)'{-h,--help}'[Show help]' \\",
        "        '(- *)--version[Print the version]' \\",
        "        '1: :->command' \\",
        "        '*:: :->arguments' && return",
        "    case $state in",
        "    command) _describe -t commands 'modelc command' commands ;;",
        "    arguments)",
        "        case $line[1] in",
    ]
    for command in commands:
        specs = []
        for option in command.options:
            names_ = [n for n in (option.short, option.long) if n]
            exclusion = "" if option.repeatable else "(%s)" % " ".join(names_)
            prefix = "*" if option.repeatable else ""
            value = ""
            if option.value:
                kind = value_kind(option.value, option.description, names)
                value = ":%s:%s" % (option.value.replace(":", "\\:"), zsh_action(kind))
            body = "[%s]%s" % (zsh_description(option.description), value)
            if len(names_) == 2:
                specs.append("%s%s{%s}%s" % (zsh_quote(exclusion), prefix and zsh_quote(prefix),
                                             ",".join(names_), zsh_quote(body)))
            else:
                specs.append(zsh_quote(exclusion + prefix + names_[0] + body))
        for position, argument in enumerate(command.arguments, start=1):
            kind = value_kind(argument.name, argument.description, names)
            marker = "*" if argument.variadic else str(position)
            optional = ":" if argument.optional else ""
            specs.append(zsh_quote("%s:%s%s:%s" % (marker, optional, argument.name, zsh_action(kind))))
        lines.append("        %s) _arguments \\" % command.name)
        lines += ["            %s \\" % spec for spec in specs[:-1]]
        lines.append("            %s ;;" % specs[-1] if specs else "            ;;")
    lines += [
        "        esac ;;",
        "    esac",
        "}",
        '_modelc "$@"',
        "",
    ]
    return "\n".join(lines)


# fish


def fish_quote(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_arguments(kind):
    if kind[0] == "files":
        return "-F"
    if kind[0] == "dirs":
        return "-x -a '(__fish_complete_directories)'"
    if kind[0] == "words":
        return "-x -a %s" % fish_quote(" ".join(kind[1]))
    return "-x"


def fish(commands, top_options):
    names = [command.name for command in commands]
    lines = [
        "# fish completion for modelc; generated by Scripts/cli-docs.py from `modelc --help`.",
        "complete -c modelc -f",
        "complete -c modelc -n __fish_use_subcommand -s h -l help -d 'Show help'",
        "complete -c modelc -n __fish_use_subcommand -l version -d 'Print the version'",
    ]
    for command in commands:
        lines.append("complete -c modelc -n __fish_use_subcommand -a %s -d %s"
                     % (command.name, fish_quote(command.summary)))
    for command in commands:
        condition = "-n '__fish_seen_subcommand_from %s'" % command.name
        for option in command.options:
            parts = ["complete -c modelc", condition]
            if option.short:
                parts.append("-s " + option.short[1:])
            if option.long:
                parts.append("-l " + option.long[2:])
            if option.value:
                parts.append("-r " + fish_arguments(value_kind(option.value, option.description, names)))
            parts.append("-d " + fish_quote(option.description))
            lines.append(" ".join(parts))
        seen = []
        for argument in command.arguments:
            kind = value_kind(argument.name, argument.description, names)
            if kind[0] == "none" or kind in seen:
                continue
            seen.append(kind)
            if kind[0] == "files":
                action = "-F"
            elif kind[0] == "dirs":
                action = "-a '(__fish_complete_directories)'"
            else:
                action = "-a " + fish_quote(" ".join(kind[1]))
            lines.append("complete -c modelc %s %s" % (condition, action))
    lines.append("")
    return "\n".join(lines)


# man


def roff_verbatim(text):
    out = []
    for line in text.rstrip("\n").splitlines():
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def man(modelc, commands, out):
    include = ["[COMMANDS IN DETAIL]",
               "Each command's help, as `modelc help COMMAND` prints it."]
    for command in commands:
        include += [".SS \"modelc %s\"" % command.name, ".nf", roff_verbatim(command.help_text), ".fi"]
    with tempfile.NamedTemporaryFile("w", suffix=".h2m", delete=False) as handle:
        handle.write("\n".join(include) + "\n")
        include_path = handle.name
    try:
        subprocess.run(["help2man", "--no-info", "--no-discard-stderr", "--section", "1",
                        "--name", "fetch, compile, load and run Core ML models on Linux",
                        "--include", include_path, "--output", str(out), modelc], check=True)
    finally:
        Path(include_path).unlink()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    modelc, outdir = sys.argv[1], Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    top = sections(run(modelc, "--help"))
    if "COMMANDS" not in top:
        sys.exit("cli-docs: '%s --help' lists no COMMANDS" % modelc)
    commands = [parse_command(modelc, name, summary) for name, summary in top["COMMANDS"]]
    top_options = ["--help", "--version"]
    (outdir / "modelc.bash").write_text(bash(commands, top_options))
    (outdir / "_modelc").write_text(zsh(commands, top_options))
    (outdir / "modelc.fish").write_text(fish(commands, top_options))
    man(modelc, commands, outdir / "modelc.1")


if __name__ == "__main__":
    main()
