// serve_log.c — llm serve's request log: one line per HTTP request, as text for people or as a
// JSON object (--log-format), written whole under the stream's lock so that the lines of requests
// that end together never mix.
#include "cli.h"

#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

// s into b for a field of a text line: printable characters as they are; backslash, newline,
// tab, CR as \\ \n \t \r; other control characters and bytes that are not UTF-8 as \xHH, C1
// controls as \u00HH (as cli_print_escaped); in an unquoted field a space as \x20 (the line's
// fields stay apart), in a quoted one '"' as \".
static void log_escaped(struct cli_strbuf *b, const char *s, bool quoted) {
    char e[8];
    for (size_t i = 0, n = strlen(s); i < n;) {
        unsigned char c = (unsigned char)s[i];
        int l = cli_utf8_char(s + i, n - i);
        if (l == 2 && c == 0xC2 && (unsigned char)s[i + 1] < 0xA0) {   // U+0080..U+009F
            snprintf(e, sizeof(e), "\\u%04X", (unsigned)(unsigned char)s[i + 1]);
            cli_sb_put(b, e, strlen(e));
            i += 2;
            continue;
        }
        if (l > 1) {
            cli_sb_put(b, s + i, (size_t)l);
            i += (size_t)l;
            continue;
        }
        const char *x = c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r"
                        : quoted && c == '"' ? "\\\"" : NULL;
        if (!x && (l == 0 || c < 0x20 || c == 0x7F || (!quoted && c == ' '))) {
            snprintf(e, sizeof(e), "\\x%02X", c);
            x = e;
        }
        if (x) cli_sb_put(b, x, strlen(x));
        else cli_sb_put(b, s + i, 1);
        i++;
    }
}

// The time now, ISO 8601 in UTC with milliseconds: 2026-12-06T10:00:00.123Z.
static void log_time(char *buf, size_t size) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, size - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

// The text line: time client method path status prompt=N completion=N ttft=Xms total=Xms, then
// "aborted" and error="..." when they apply ('-' for what does not).
static void log_text(struct cli_strbuf *b, const char *time, const struct cli_reqlog_entry *e) {
    char num[64];
    cli_sb_put(b, time, strlen(time));
    const char *fields[] = {e->client, e->method, e->path};
    for (size_t i = 0; i < CLI_ARRAY_LEN(fields); i++) {
        cli_sb_put(b, " ", 1);
        if (fields[i] && fields[i][0]) log_escaped(b, fields[i], false);
        else cli_sb_put(b, "-", 1);
    }
    if (e->status > 0) snprintf(num, sizeof(num), " %d", e->status);
    else snprintf(num, sizeof(num), " -");
    cli_sb_put(b, num, strlen(num));
    if (e->prompt >= 0) snprintf(num, sizeof(num), " prompt=%lld completion=%lld", e->prompt, e->completion);
    else snprintf(num, sizeof(num), " prompt=- completion=-");
    cli_sb_put(b, num, strlen(num));
    if (e->ttft_ms >= 0) snprintf(num, sizeof(num), " ttft=%.1fms", e->ttft_ms);
    else snprintf(num, sizeof(num), " ttft=-");
    cli_sb_put(b, num, strlen(num));
    snprintf(num, sizeof(num), " total=%.1fms", e->total_ms);
    cli_sb_put(b, num, strlen(num));
    if (e->aborted) cli_sb_put(b, " aborted", 8);
    if (e->error) {
        cli_sb_put(b, " error=\"", 8);
        log_escaped(b, e->error, true);
        cli_sb_put(b, "\"", 1);
    }
    cli_sb_put(b, "\n", 1);
}

// The JSON line: the same fields, every key on every line (null for what does not apply).
static void log_json(struct cli_strbuf *b, const char *time, const struct cli_reqlog_entry *e) {
    json_t *o = cli_jcheck(json_object());
    cli_jset(o, "time", cli_json_cstr(time));
    cli_jset(o, "client", cli_json_cstr(e->client));
    cli_jset(o, "method", cli_json_cstr(e->method));
    cli_jset(o, "path", cli_json_cstr(e->path));
    cli_jset(o, "status", e->status > 0 ? cli_json_int(e->status) : cli_jcheck(json_null()));
    cli_jset(o, "prompt_tokens", e->prompt >= 0 ? cli_json_int(e->prompt) : cli_jcheck(json_null()));
    cli_jset(o, "completion_tokens", e->prompt >= 0 ? cli_json_int(e->completion) : cli_jcheck(json_null()));
    cli_jset(o, "ttft_ms", e->ttft_ms >= 0 ? cli_json_num(e->ttft_ms, 1) : cli_jcheck(json_null()));
    cli_jset(o, "total_ms", cli_json_num(e->total_ms, 1));
    cli_jset(o, "aborted", cli_jcheck(json_boolean(e->aborted)));
    cli_jset(o, "error", cli_json_cstr(e->error));
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(o);
    if (!s) cli_die("out of memory");
    cli_sb_put(b, s, strlen(s));
    cli_sb_put(b, "\n", 1);
    free(s);
}

void cli_reqlog_client(const struct sockaddr *sa, char *buf, size_t size) {
    socklen_t len = !sa ? 0 : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                            : sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : 0;
    if (!len || getnameinfo(sa, len, buf, (socklen_t)size, NULL, 0, NI_NUMERICHOST)) snprintf(buf, size, "-");
}

void cli_reqlog_write(const struct cli_reqlog *L, const struct cli_reqlog_entry *e) {
    if (L->quiet) return;
    char time[40];
    log_time(time, sizeof(time));
    struct cli_strbuf b = {0};
    if (L->format == CLI_LOG_JSON) log_json(&b, time, e);
    else log_text(&b, time, e);
    // one write of the whole line: stdio's lock keeps the server's other messages out of it too
    flockfile(L->f);
    fwrite(b.p, 1, b.n, L->f);
    fflush(L->f);
    funlockfile(L->f);
    free(b.p);
}
