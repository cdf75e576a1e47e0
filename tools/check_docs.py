#!/usr/bin/env python3
# tools/check_docs.py: the documentation's checks, run by `make check-docs` and CI.
#   - links: every relative link of README.md and docs/*.md, [text](path) or [text](path#anchor)
#     or [text](#anchor), names a file or folder of the tree, and its anchor a heading of the
#     file it points to, by GitHub's rule for a heading's anchor: the heading's text without its
#     markup, lowercase, every character but letters, digits, spaces, '-' and '_' dropped, spaces
#     turned into '-'; a repeated heading's anchor gets -1, -2, ... Links inside code are left out.
#   - commands: README.md's ```sh blocks are run, in order, each by `sh -e` from the repository
#     root, standard input /dev/null, with HOME a new temporary folder whose .cache/llm.c-tests is
#     the fixtures cache (LLM_FIXTURES), so that the README's ~/.cache/llm.c-tests paths find the
#     models `make fixtures` fetched (and nothing is written to the user's home); each block must
#     exit 0 within 120 seconds. A block that needs the network, a long time, a GPU or a server
#     running is fenced as ```console (or text, python, c, ...) or preceded by a
#     <!-- norun --> comment: it is shown, not run. No sh block at all is a failure too.
# Prints what it checked and each finding; exits 1 if there is one. Python's standard library only.
# Usage (from the repository root): python3 tools/check_docs.py [--links-only]
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata

BLOCK_TIMEOUT = 120
FENCE = re.compile(r'^(\s*)(```+|~~~+)\s*([^\s`]*)')
LINK = re.compile(r'!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')


def doc_files():
    return ['README.md'] + sorted(glob.glob('docs/*.md'))


def blocks_and_prose(lines):
    """(prose lines with their numbers, fenced blocks): a block is (language, first line number,
    its lines, run), run False after a <!-- norun --> comment."""
    prose, blocks, block, norun = [], [], None, False
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if block is not None:
            if m and m.group(2)[0] == block['fence'][0] and len(m.group(2)) >= len(block['fence']) \
                    and not m.group(3):
                blocks.append(block)
                block = None
            else:
                block['lines'].append(line)
            continue
        if m:
            block = {'fence': m.group(2), 'lang': m.group(3).lower(), 'line': n, 'lines': [],
                     'run': not norun}
            norun = False
            continue
        if line.strip():
            norun = bool(re.match(r'\s*<!--\s*norun\b', line))
        prose.append((n, line))
    if block is not None:
        blocks.append(block)
    return prose, blocks


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)     # links: their text
    text = re.sub(r'<[^>]+>', '', text)                            # inline HTML
    text = text.replace('`', '').strip().lower()
    keep = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in ' -_' or cat[0] in 'LMN' or cat == 'Pc':
            keep.append(ch)
    return ''.join(keep).replace(' ', '-')


def anchors(path, cache={}):
    if path not in cache:
        lines = open(path, encoding='utf-8').read().split('\n')
        seen, found = {}, set()
        for _, line in blocks_and_prose(lines)[0]:
            m = re.match(r' {0,3}(#{1,6})\s+(.*?)\s*#*\s*$', line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else '%s-%d' % (s, k))
        cache[path] = found
    return cache[path]


def check_links():
    bad, count = [], 0
    for f in doc_files():
        lines = open(f, encoding='utf-8').read().split('\n')
        for n, line in blocks_and_prose(lines)[0]:
            line = re.sub(r'(`+).*?\1', '', line)                     # inline code
            for m in LINK.finditer(line):
                target = m.group(2)
                if not target or re.match(r'[a-zA-Z][a-zA-Z0-9+.-]*:', target):   # http:, mailto:, ...
                    continue
                count += 1
                path, _, anchor = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
                where = '%s:%d: [%s](%s)' % (f, n, m.group(1), target)
                if not os.path.exists(dest):
                    bad.append('%s: %s does not exist' % (where, dest))
                elif anchor and (not dest.endswith('.md') or anchor not in anchors(dest)):
                    bad.append('%s: %s has no heading whose anchor is #%s' % (where, dest, anchor))
    return bad, count


def commands(block_lines):
    """The block's commands: lines joined at a trailing backslash, without blanks and comments."""
    cmds, cur = [], ''
    for line in block_lines:
        cur += line
        if cur.endswith('\\'):
            cur = cur[:-1] + ' '
            continue
        if cur.strip() and not cur.lstrip().startswith('#'):
            cmds.append(cur.strip())
        cur = ''
    if cur.strip():
        cmds.append(cur.strip())
    return cmds


def run_readme():
    lines = open('README.md', encoding='utf-8').read().split('\n')
    blocks = blocks_and_prose(lines)[1]
    runnable = [b for b in blocks if b['run'] and b['lang'] == 'sh']
    shown = len(blocks) - len(runnable)
    if not runnable:
        return ['README.md: no ```sh block to run (the check would prove nothing)'], 0, 0, shown
    fixtures = os.environ.get('LLM_FIXTURES') or os.path.join(
        os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'llm.c-tests')
    if not os.path.isdir(fixtures):
        return ['the fixtures cache %s is missing: run make fixtures (or make demo)' % fixtures], 0, 0, shown
    home = tempfile.mkdtemp(prefix='llm-check-docs.')
    bad, ncmds = [], 0
    try:
        os.makedirs(os.path.join(home, '.cache'))
        os.symlink(os.path.abspath(fixtures), os.path.join(home, '.cache', 'llm.c-tests'))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('XDG_') and k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'LLM_FIXTURES')}
        env['HOME'] = home
        for b in runnable:
            cmds = commands(b['lines'])
            ncmds += len(cmds)
            print('README.md:%d: ```sh, %d command%s' % (b['line'], len(cmds), 's' if len(cmds) != 1 else ''))
            for c in cmds:
                print('  $ ' + c)
            script = '\n'.join(b['lines']) + '\n'
            try:
                r = subprocess.run(['sh', '-e', '-x', '-c', script], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                   timeout=BLOCK_TIMEOUT)
                out, rc = r.stdout.decode('utf-8', 'replace'), r.returncode
            except subprocess.TimeoutExpired as e:
                out, rc = (e.stdout or b'').decode('utf-8', 'replace'), 'timeout (%d s)' % BLOCK_TIMEOUT
            if rc != 0:
                trace = [x for x in out.split('\n') if x.startswith('+ ')]
                bad.append('README.md:%d: the ```sh block failed (exit status %s) at: %s\n%s' % (
                    b['line'], rc, trace[-1][2:] if trace else '?',
                    '\n'.join('    ' + x for x in out.rstrip('\n').split('\n')[-25:])))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return bad, len(runnable), ncmds, shown


def main():
    bad, nlinks = check_links()
    print('check-docs: %d relative links in %d files' % (nlinks, len(doc_files())))
    if '--links-only' not in sys.argv[1:]:
        if not os.path.exists('llm'):
            bad.append('./llm is missing: build it first (make)')
        else:
            b, nblocks, ncmds, shown = run_readme()
            bad += b
            print('check-docs: README.md: %d commands in %d ```sh blocks run (%d other blocks shown only)'
                  % (ncmds, nblocks, shown))
    for x in bad:
        print(x)
    if bad:
        print('check-docs: %d problem%s' % (len(bad), 's' if len(bad) != 1 else ''))
        return 1
    print('check-docs: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
