// serve_scan.c — llm serve's scanner of request bodies: a JSON body read byte by byte as it
// arrives, never built, for what must be known before it is parsed (the longest prompt of token
// ids; what parsing it will hold).
#include "cli.h"

#include <limits.h>
#include <string.h>

// What Jansson holds for a JSON value it parses (the json_t with its payload, its slot in an
// array or object, malloc's overhead; measured with glibc, rounded up): a body's parse is charged
// to the bodies' budget, so that 16 MiB of "1," (8 million numbers, some 400 MB parsed) or of
// "{}," cannot be parsed by many at once.
#define SCAN_JSON_ATOM_BYTES 48     // a number, true, false, null
#define SCAN_JSON_STRING_BYTES 96   // a string (a key too), plus its bytes
#define SCAN_JSON_ARRAY_BYTES 160
#define SCAN_JSON_OBJECT_BYTES 256

static int scan_hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0;
}

static void scan_key(struct cli_scan *z, unsigned c) {
    if (z->key_len < (int)sizeof(z->key)) z->key[z->key_len] = c < 0x80 ? (char)c : (char)0x80;
    if (z->key_len < INT_MAX) z->key_len++;
}

long long cli_scan(struct cli_scan *z, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (z->str) {
            if (z->hex) {
                z->cp = z->cp * 16 + (unsigned)scan_hexval(c);
                if (--z->hex == 0 && z->in_key) scan_key(z, z->cp);
            } else if (z->esc) {
                z->esc = false;
                if (c == 'u') z->hex = 4, z->cp = 0;
                else if (z->in_key)
                    scan_key(z, c == '"' || c == '\\' || c == '/' ? c : 1);   // \n, \t...: not letters
            } else if (c == '\\') {
                z->esc = true;
            } else if (c == '"') {
                z->str = false;
                if (z->in_key) {
                    z->in_key = false;
                    z->key_prompt = z->key_len == 6 && !memcmp(z->key, "prompt", 6);
                }
            } else if (z->in_key) {
                scan_key(z, c);
            }
            z->parse_bytes++;
            continue;
        }
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || (c >= 'a' && c <= 'z') ||
            (c >= 'A' && c <= 'Z')) {
            // a number or literal begins: in the prompt's array, or in an array of it, an id
            if (!z->atom && z->prompt && (z->depth == 2 || z->depth == 3) && ++z->ids > z->max_ids) z->max_ids = z->ids;
            if (!z->atom) z->values++, z->parse_bytes += SCAN_JSON_ATOM_BYTES;
            z->atom = true;
            continue;
        }
        z->atom = false;
        z->values += c == '"' || c == '{' || c == '[';
        z->parse_bytes += c == '"' ? SCAN_JSON_STRING_BYTES : c == '[' ? SCAN_JSON_ARRAY_BYTES
                          : c == '{' ? SCAN_JSON_OBJECT_BYTES : 0;
        switch (c) {
        case '"':
            z->str = true;
            if (z->depth == 1 && z->want_key) z->in_key = true, z->want_key = false, z->key_len = 0;
            break;
        case '{':
            if (++z->depth == 1) z->want_key = true;
            break;
        case '[':
            if (++z->depth <= 3) z->ids = 0;   // a prompt of ids, or a list of them, begins
            break;
        case ']':
        case '}':
            if (z->depth > 0 && --z->depth == 0) z->prompt = false;
            break;
        case ',':
            if (z->depth == 1) z->want_key = true, z->prompt = false;
            break;
        case ':':
            if (z->depth == 1) z->prompt = z->key_prompt;
            break;
        default:
            break;
        }
    }
    return z->max_ids;
}
