#!/usr/bin/env python3
# tools/lint.py: the source tree's shape (docs/architecture.md), checked by `make lint` and CI.
#   - no line over 120 columns in src/, backends/ (C files and headers) and cli/
#   - no source file of src/ or backends/ over 2,000 lines
#   - no function over 100 lines (its first line to its closing brace) in src/, backends/, cli/
#   - every function of src/ and backends/ is static, public (llm_*, declared in llm.h) or declared
#     LLM__INTERNAL in src/internal.h or backends/backend.h (else llm.c would export it)
# Prints each finding as FILE:LINE: what; exits 1 if there is one. Python's standard library only.
import glob
import re
import sys

MAX_COLS, MAX_FILE, MAX_FUNC = 120, 2000, 100


def files():
    fs = glob.glob('src/*.[ch]') + glob.glob('backends/*.[ch]') + glob.glob('cli/*.[ch]')
    return sorted(fs)


def code_only(line):
    """The line without string and character literals and // comments (braces in them do not count)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return re.sub(r'//.*', '', line)


def functions(lines):
    """(name, first line, last line) of each function definition at file scope (1-based)."""
    depth, start, in_comment = 0, None, False
    for i, raw in enumerate(lines):
        if raw.startswith('#'):
            continue
        s = code_only(raw)
        if in_comment:
            if '*/' not in s:
                continue
            s, in_comment = s.split('*/', 1)[1], False
        s = re.sub(r'/\*.*?\*/', '', s)
        if '/*' in s:
            s, in_comment = s.split('/*', 1)[0], True
        for ch in s:
            if ch == '{':
                if depth == 0:
                    k = i
                    while k > 0 and not re.match(r'[A-Za-z_]', lines[k]):
                        k -= 1
                    start = k
                depth += 1
            elif ch == '}':
                depth -= 1
                if depth == 0 and start is not None:
                    head = lines[start]
                    is_func = '(' in head and '=' not in head.split('(')[0] and \
                        not re.match(r'(static\s+)?(const\s+)?(struct|union|enum)\s+\w+\s*\{', head)
                    if is_func:
                        m = re.search(r'(\w+)\s*\(', re.sub(r'__attribute__\s*\(\(.*?\)\)', '', head))
                        yield (m.group(1) if m else '?', start + 1, i + 1)
                    start = None


def shared_names():
    """The functions src/internal.h and backends/backend.h declare LLM__INTERNAL."""
    text = open('src/internal.h').read() + open('backends/backend.h').read()
    return set(re.findall(r'^LLM__INTERNAL\b[^;{]*?\b(llm__\w+)\s*\(', text, re.M))


def main():
    bad = []
    shared = shared_names()
    for f in files():
        lines = open(f, encoding='utf-8').read().split('\n')
        for n, line in enumerate(lines, 1):
            if len(line) > MAX_COLS:
                bad.append('%s:%d: %d columns (at most %d)' % (f, n, len(line), MAX_COLS))
        if f.startswith(('src/', 'backends/')) and len(lines) - 1 > MAX_FILE:
            bad.append('%s: %d lines (at most %d: split it)' % (f, len(lines) - 1, MAX_FILE))
        if f.endswith('.c'):
            for name, a, b in functions(lines):
                if b - a + 1 > MAX_FUNC:
                    bad.append('%s:%d: %s is %d lines (at most %d: split it into steps)' % (f, a, name, b - a + 1, MAX_FUNC))
                head = lines[a - 1]
                if f.startswith(('src/', 'backends/')) and not re.search(r'\bstatic\b', head) and \
                        name.startswith('llm__') and name not in shared:
                    bad.append('%s:%d: %s is neither static nor declared LLM__INTERNAL in src/internal.h' % (f, a, name))
    for b in bad:
        print(b)
    if bad:
        print('tools/lint.py: %d finding(s)' % len(bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
