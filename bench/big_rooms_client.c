/* Benchmark 17's load client in C (issue 44): `big_rooms_client CONFIG.json`, the same
 * protocol, phases and output as bench/big_rooms_client.js (storm, states, count, quit: one JSON
 * command a line on stdin, one JSON line per command on stdout, `ready` once every socket has its
 * hello), built so that the load takes little of the machine's 2 cores and the servers' CPU is
 * what a run measures. Node's client spent ~21 us of CPU per delivered frame (libuv and ws under
 * a mostly idle V8); this one holds its sockets on one epoll, without a runtime.
 *
 * bench/big_rooms.py compiles it at run time (`cc -O2 ... -lz`, into the run's temp folder)
 * when BENCH_BIG_ROOMS_CLIENT=c. Each socket: one user (its session cookie, the server's
 * Origin), a plain HTTP/1.1 Upgrade offering permessage-deflate as browsers do, `hello`
 * accepting presence.diff once the server's hello came, `{"type":"heartbeat"}` every
 * `beat_every` seconds (10) spread over 20 slots, as the Node client beats. Client frames are
 * masked; they are sent uncompressed even when deflate was negotiated (RFC 7692 lets an endpoint
 * send a message uncompressed: the servers then inflate nothing of the few frames clients send).
 * Server frames: text (fragments joined), ping -> pong, close -> close, compressed messages
 * inflated with zlib, the context kept across messages (unless server_no_context_takeover).
 *
 * What it reads: a round of the loop is one epoll_wait, then each ready socket read to EAGAIN
 * (a 256 KiB read at a time) and every complete frame handled; then the timers that are due
 * (heartbeats, joins, senders, churn), then, when BENCH_BIG_ROOMS_C_ROUND_MS (default 2) is > 0,
 * a sleep to the round's end, so that frames gather: more sockets ready a wake-up, all of a
 * socket's frames in one read (at 10 frames a socket a second a read still takes about one). A
 * delivery's latency is read at the read that brought it: a round adds at most its length to it.
 * Measured (docs/benchmarks.md, section 17, sixth session): ~11 us of CPU a delivered frame at
 * 600 sockets and 5-8 us at 5,000, two thirds of it the kernel's, against Node's 27-30 and 16-19.
 *
 * The states phase, as in Node: every socket counts its presence.roomstate frames and bytes (a
 * type looked for in the frame's first 64 bytes, where the server writes it, the rest unread);
 * one socket in SAMPLE (every socket of the probe) parses them and takes `now - data.t` of every
 * state. The storm: rosters kept as bitmaps over interned user ids (each snapshot page, then
 * each diff); distinct rosters printed once each. JSON: a small tokenizer (jsmn-like) below; the
 * strings are kept as the server escaped them (user ids are compared and printed as sent).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define SAMPLE 10
#define CHUNKS 20 /* heartbeat slots, as the Node client's */
#define READ_SIZE (256 * 1024)

static double wall(void) { /* the wall clock, as Date.now() / time.time() */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) die("out of memory");
  return p;
}

/* -- growable buffers ---------------------------------------------------------------------- */
typedef struct {
  char *p;
  size_t len, cap;
} buf_t;

static void buf_reserve(buf_t *b, size_t more) {
  if (b->len + more <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more) cap *= 2;
  b->p = xrealloc(b->p, cap);
  b->cap = cap;
}
static void buf_add(buf_t *b, const void *p, size_t n) {
  buf_reserve(b, n);
  memcpy(b->p + b->len, p, n);
  b->len += n;
}
static void buf_drop(buf_t *b, size_t n) { /* the first n bytes consumed */
  memmove(b->p, b->p + n, b->len - n);
  b->len -= n;
}
static void buf_free(buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

typedef struct {
  double *p;
  size_t len, cap;
} dvec_t;
static void dvec_add(dvec_t *v, double x) {
  if (v->len == v->cap) {
    v->cap = v->cap ? v->cap * 2 : 64;
    v->p = xrealloc(v->p, v->cap * sizeof(double));
  }
  v->p[v->len++] = x;
}

/* -- JSON: a tokenizer, tokens in document order, each knowing where its subtree ends ---------- */
enum { J_OBJ, J_ARR, J_STR, J_PRIM };
typedef struct {
  int type, start, end, next; /* [start, end) of the text (a string's without its quotes) */
} tok_t;
typedef struct {
  const char *s;
  int len, pos, n, cap;
  tok_t *t;
} json_t;

static void ws_skip(json_t *j) {
  while (j->pos < j->len && strchr(" \t\r\n", j->s[j->pos]) && j->s[j->pos]) j->pos++;
}
static int j_new(json_t *j, int type) {
  if (j->n == j->cap) {
    j->cap = j->cap ? j->cap * 2 : 256;
    j->t = xrealloc(j->t, j->cap * sizeof(tok_t));
  }
  j->t[j->n] = (tok_t){type, j->pos, j->pos, 0};
  return j->n++;
}
static int j_value(json_t *j, int depth) { /* 0, or -1: not JSON */
  ws_skip(j);
  if (j->pos >= j->len || depth > 64) return -1;
  char c = j->s[j->pos];
  if (c == '{' || c == '[') {
    int i = j_new(j, c == '{' ? J_OBJ : J_ARR);
    char close = c == '{' ? '}' : ']';
    j->pos++;
    ws_skip(j);
    if (j->pos < j->len && j->s[j->pos] == close) {
      j->pos++;
    } else {
      for (;;) {
        if (c == '{') {
          ws_skip(j);
          if (j->pos >= j->len || j->s[j->pos] != '"' || j_value(j, depth + 1)) return -1;
          ws_skip(j);
          if (j->pos >= j->len || j->s[j->pos++] != ':') return -1;
        }
        if (j_value(j, depth + 1)) return -1;
        ws_skip(j);
        if (j->pos >= j->len) return -1;
        char d = j->s[j->pos++];
        if (d == close) break;
        if (d != ',') return -1;
      }
    }
    j->t[i].end = j->pos;
    j->t[i].next = j->n;
    return 0;
  }
  if (c == '"') {
    j->pos++;
    int i = j_new(j, J_STR);
    while (j->pos < j->len && j->s[j->pos] != '"') j->pos += j->s[j->pos] == '\\' ? 2 : 1;
    if (j->pos >= j->len) return -1;
    j->t[i].end = j->pos++;
    j->t[i].next = j->n;
    return 0;
  }
  int i = j_new(j, J_PRIM);
  while (j->pos < j->len && !strchr(",]} \t\r\n", j->s[j->pos])) j->pos++;
  j->t[i].end = j->pos;
  j->t[i].next = j->n;
  return 0;
}
static int json_parse(json_t *j, const char *s, int len) {
  j->s = s;
  j->len = len;
  j->pos = 0;
  j->n = 0;
  return j_value(j, 0);
}
static int tok_is(json_t *j, int i, const char *lit) {
  int n = (int)strlen(lit);
  return j->t[i].end - j->t[i].start == n && !memcmp(j->s + j->t[i].start, lit, n);
}
/* the value of `key` in object i, or -1 */
static int j_get(json_t *j, int i, const char *key) {
  if (i < 0 || j->t[i].type != J_OBJ) return -1;
  for (int k = i + 1; k < j->t[i].next; k = j->t[k + 1].next) {
    if (tok_is(j, k, key)) return k + 1;
  }
  return -1;
}
static double j_num(json_t *j, int i) {
  return i < 0 ? 0 : strtod(j->s + j->t[i].start, NULL); /* ends at the next delimiter */
}
static int j_truthy(json_t *j, int i) { /* as JavaScript's !!: absent, false, null, 0, "" */
  if (i < 0) return 0;
  if (j->t[i].type == J_STR) return j->t[i].end > j->t[i].start;
  if (j->t[i].type != J_PRIM) return 1;
  if (tok_is(j, i, "true")) return 1;
  return !(tok_is(j, i, "false") || tok_is(j, i, "null") || j_num(j, i) == 0);
}
static char *j_raw(json_t *j, int i) { /* a token's text as written (a string unquoted) */
  int n = j->t[i].end - j->t[i].start;
  char *out = xrealloc(NULL, n + 1);
  memcpy(out, j->s + j->t[i].start, n);
  out[n] = 0;
  return out;
}
static char *j_str(json_t *j, int i) { /* a string unescaped (\uXXXX: ASCII only) */
  char *out = j_raw(j, i), *w = out;
  for (char *r = out; *r; r++) {
    if (*r != '\\' || !r[1]) {
      *w++ = *r;
      continue;
    }
    r++;
    switch (*r) {
      case 'n': *w++ = '\n'; break;
      case 't': *w++ = '\t'; break;
      case 'r': *w++ = '\r'; break;
      case 'u': *w++ = (char)strtol((char[]){r[1], r[2], r[3], r[4], 0}, NULL, 16); r += 4; break;
      default: *w++ = *r;
    }
  }
  *w = 0;
  return out;
}

/* -- user ids, interned: a roster is a bitmap over them ---------------------------------------- */
static char **names;
static int n_names, names_cap;
static int *name_slots; /* open addressing: id + 1, 0 empty */
static int slots_cap;

static uint64_t hash(const char *s, int n) {
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}
static int intern(const char *s, int n) {
  if ((n_names + 1) * 2 > slots_cap) {
    int cap = slots_cap ? slots_cap * 2 : 1 << 14;
    int *slots = calloc(cap, sizeof(int));
    for (int k = 0; k < n_names; k++) {
      uint64_t h = hash(names[k], (int)strlen(names[k])) & (cap - 1);
      while (slots[h]) h = (h + 1) & (cap - 1);
      slots[h] = k + 1;
    }
    free(name_slots);
    name_slots = slots;
    slots_cap = cap;
  }
  uint64_t h = hash(s, n) & (slots_cap - 1);
  while (name_slots[h]) {
    const char *got = names[name_slots[h] - 1];
    if ((int)strlen(got) == n && !memcmp(got, s, n)) return name_slots[h] - 1;
    h = (h + 1) & (slots_cap - 1);
  }
  if (n_names == names_cap) {
    names_cap = names_cap ? names_cap * 2 : 1024;
    names = xrealloc(names, names_cap * sizeof(char *));
  }
  names[n_names] = xrealloc(NULL, n + 1);
  memcpy(names[n_names], s, n);
  names[n_names][n] = 0;
  name_slots[h] = n_names + 1;
  return n_names++;
}

/* -- sockets ------------------------------------------------------------------------------------- */
enum { S_CONNECTING, S_UPGRADING, S_HELLO, S_OPEN, S_CLOSED };
enum { K_NONE, K_STORM, K_STATES, K_COUNT };

typedef struct {
  int fd, g, idx, state, kind;
  const char *cookie;
  int server;
  buf_t in, out, msg; /* unread bytes, unsent bytes, a fragmented message so far */
  int msg_deflated, deflate, no_takeover;
  z_stream *inflate;
  char *user;
  /* phase figures */
  long frames, bytes;
  double first_at, last_at, snapshot_at, full_at; /* -1: none (snapshot_at, full_at) */
  uint64_t *roster;
  int roster_words, roster_n, counted;
  dvec_t latencies;
  double next_beat, next_act, retry_at; /* INFINITY: nothing due */
  int act_k;
  int close_code, watching_out;
} sock_t;

static struct {
  int n_servers;
  char **host, **port, **path, **origin;
  int probe;
  double beat_every;
  int concurrency;
  double round; /* seconds: see the top */
} cfg;

static sock_t *socks;
static int n_socks, ep;
static int opening, opened; /* sockets between connect and hello; those with their hello */
static buf_t stdin_buf;
static char rbuf[READ_SIZE];
static json_t J; /* frames' tokens (reused) */
static long retries;
static dvec_t lags;
static double lag_next;
static double next_due = 0; /* the earliest timer of any socket (see timers()) */

/* the running phase */
static struct {
  int kind, n, missing, senders, churners;
  double start_at, spread, settle, seconds, hz, rate, end_at, counted_at;
  char *room, *room_json; /* as received, and escaped for frames */
  int joined, uncounted;
  long changes;
  int counted_done;
} ph;

static uint32_t rng_state = 2463534242u;
static uint32_t rnd(void) { /* xorshift32: masks and the handshake key */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

static void watch(sock_t *s, int out) {
  if (s->watching_out == out) return;
  s->watching_out = out;
  struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = s};
  epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev);
}

static void sock_close(sock_t *s, int code) {
  if (s->state == S_CLOSED) return;
  if (s->state < S_OPEN) opening--;
  if (s->close_code == 0) s->close_code = code;
  epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
  close(s->fd);
  s->state = S_CLOSED;
  buf_free(&s->in);
  buf_free(&s->out);
  buf_free(&s->msg);
  if (s->inflate) {
    inflateEnd(s->inflate);
    free(s->inflate);
    s->inflate = NULL;
  }
  if (s->user == NULL) die("socket %d closed before its hello: %d", s->g, s->close_code);
}

static void flush_out(sock_t *s) {
  while (s->out.len) {
    ssize_t w = write(s->fd, s->out.p, s->out.len);
    if (w < 0) {
      if (errno == EAGAIN) break;
      sock_close(s, 1006);
      return;
    }
    buf_drop(&s->out, w);
  }
  watch(s, s->out.len > 0);
}

/* one masked client frame */
static void ws_send(sock_t *s, int op, const char *p, size_t n) {
  if (s->state == S_CLOSED) return;
  unsigned char h[14];
  int k = 0;
  h[k++] = 0x80 | op;
  if (n < 126) {
    h[k++] = 0x80 | n;
  } else if (n < 65536) {
    h[k++] = 0x80 | 126;
    h[k++] = n >> 8;
    h[k++] = n & 255;
  } else {
    h[k++] = 0x80 | 127;
    for (int b = 7; b >= 0; b--) h[k++] = ((uint64_t)n >> (8 * b)) & 255;
  }
  uint32_t m = rnd();
  memcpy(h + k, &m, 4);
  const unsigned char *mask = h + k;
  k += 4;
  int was_empty = s->out.len == 0;
  buf_add(&s->out, h, k);
  buf_reserve(&s->out, n);
  unsigned char *w = (unsigned char *)s->out.p + s->out.len;
  for (size_t i = 0; i < n; i++) w[i] = p[i] ^ mask[i & 3];
  s->out.len += n;
  if (was_empty) flush_out(s);
}
static void send_text(sock_t *s, const char *text) {
  if (s->state == S_OPEN) ws_send(s, 1, text, strlen(text));
}
static void send_room(sock_t *s, const char *type) {
  char f[512];
  snprintf(f, sizeof f, "{\"type\":\"%s\",\"room\":%s}", type, ph.room_json);
  send_text(s, f);
}

/* -- the phases' handling of a text frame ------------------------------------------------------ */
static void roster_set(sock_t *s, int id, int on) {
  int w = id / 64;
  if (w >= s->roster_words) {
    if (!on) return;
    int words = (w + 1) * 2;
    s->roster = xrealloc(s->roster, words * sizeof(uint64_t));
    memset(s->roster + s->roster_words, 0, (words - s->roster_words) * sizeof(uint64_t));
    s->roster_words = words;
  }
  uint64_t bit = 1ULL << (id % 64);
  if (on && !(s->roster[w] & bit)) s->roster_n++;
  if (!on && (s->roster[w] & bit)) s->roster_n--;
  s->roster[w] = on ? s->roster[w] | bit : s->roster[w] & ~bit;
}
static void roster_list(sock_t *s, json_t *j, int arr, int on) {
  if (arr < 0 || j->t[arr].type != J_ARR) return;
  for (int k = arr + 1; k < j->t[arr].next; k = j->t[k].next) {
    int u = j_get(j, k, "user");
    if (u >= 0) roster_set(s, intern(j->s + j->t[u].start, j->t[u].end - j->t[u].start), on);
  }
}

static const char *within(const char *text, size_t n, const char *what) {
  return memmem(text, n, what, strlen(what));
}

static void on_text(sock_t *s, const char *text, size_t n, double t) {
  if (!s->user) { /* the server's hello */
    if (json_parse(&J, text, (int)n)) die("socket %d: a hello not JSON", s->g);
    int u = j_get(&J, 0, "user");
    if (u < 0) die("socket %d: a hello without its user", s->g);
    s->user = j_raw(&J, u);
    s->state = S_OPEN;
    opening--;
    opened++;
    send_text(s, "{\"type\":\"hello\",\"accept\":[\"presence.diff\"]}");
    return;
  }
  int kind = s->kind;
  if ((kind == K_STORM || kind == K_COUNT) && within(text, n, "\"unavailable\"")) {
    /* Redis refused the join (a timeout): asked again a second later, as presence.js does */
    int ty = -1, co = -1, fr = -1;
    if (json_parse(&J, text, (int)n) == 0) {
      ty = j_get(&J, 0, "type");
      co = j_get(&J, 0, "code");
      fr = j_get(&J, 0, "frame");
    }
    if (ty >= 0 && co >= 0 && fr >= 0 && tok_is(&J, ty, "error") &&
        tok_is(&J, co, "unavailable") && tok_is(&J, fr, "join")) {
      retries++;
      s->retry_at = t + 1;
      if (s->retry_at < next_due) next_due = s->retry_at;
    }
    return;
  }
  if (kind == K_STATES) {
    if (!within(text, n < 64 ? n : 64, "\"presence.roomstate\"")) return;
    s->frames++;
    s->bytes += n;
    if (cfg.probe || s->g % SAMPLE == 0) {
      if (json_parse(&J, text, (int)n)) return;
      int arr = j_get(&J, 0, "states");
      if (arr < 0 || J.t[arr].type != J_ARR) return;
      for (int k = arr + 1; k < J.t[arr].next; k = J.t[k].next) {
        int d = j_get(&J, k, "data");
        int ts = j_get(&J, d, "t");
        if (ts >= 0) dvec_add(&s->latencies, t - j_num(&J, ts));
      }
    }
    return;
  }
  if (kind == K_COUNT) {
    if (within(text, n < 64 ? n : 64, "\"presence.count\"")) {
      s->frames++;
      s->bytes += n;
      s->counted = 1;
    }
    return;
  }
  if (kind != K_STORM) return;
  if (json_parse(&J, text, (int)n)) return;
  int type = j_get(&J, 0, "type"), room = j_get(&J, 0, "room");
  if (type < 0 || room < 0 || J.t[room].type != J_STR) return;
  int rn = J.t[room].end - J.t[room].start;
  if (rn != (int)strlen(ph.room) || memcmp(J.s + J.t[room].start, ph.room, rn)) return;
  if (tok_is(&J, type, "presence.state")) {
    if (!j_truthy(&J, j_get(&J, 0, "page"))) {
      if (s->roster) memset(s->roster, 0, s->roster_words * sizeof(uint64_t));
      s->roster_n = 0;
    }
    roster_list(s, &J, j_get(&J, 0, "members"), 1);
    if (!j_truthy(&J, j_get(&J, 0, "more"))) s->snapshot_at = t;
  } else if (tok_is(&J, type, "presence.diff")) {
    s->frames++;
    s->bytes += n;
    if (!s->first_at) s->first_at = t;
    s->last_at = t;
    roster_list(s, &J, j_get(&J, 0, "left"), 0);
    roster_list(s, &J, j_get(&J, 0, "joined"), 1);
  } else {
    return;
  }
  if (s->full_at < 0 && s->roster_n >= ph.n) {
    s->full_at = t;
    if (--ph.missing <= 0 && ph.end_at == INFINITY) ph.end_at = t + 0.5; /* a frame on its way */
  }
}

/* a whole message: inflated when compressed */
static buf_t plain;
static void on_message(sock_t *s, const char *p, size_t n, int deflated, double t) {
  if (deflated) {
    if (!s->inflate) {
      s->inflate = calloc(1, sizeof(z_stream));
      if (inflateInit2(s->inflate, -15) != Z_OK) die("inflateInit2");
    }
    static const unsigned char tail[4] = {0, 0, 0xff, 0xff};
    plain.len = 0;
    z_stream *z = s->inflate;
    for (int part = 0; part < 2; part++) {
      z->next_in = (unsigned char *)(part ? (const char *)tail : p);
      z->avail_in = part ? 4 : n;
      do {
        buf_reserve(&plain, n * 4 + 4096);
        z->next_out = (unsigned char *)plain.p + plain.len;
        z->avail_out = plain.cap - plain.len;
        int rc = inflate(z, Z_SYNC_FLUSH);
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
          sock_close(s, 1007);
          return;
        }
        plain.len = plain.cap - z->avail_out;
      } while (z->avail_out == 0);
    }
    if (s->no_takeover) inflateReset(z);
    p = plain.p;
    n = plain.len;
  }
  on_text(s, p, n, t);
}

/* every complete frame in buf [p, p + n): the bytes consumed */
static size_t on_frames(sock_t *s, const char *p, size_t n, double t) {
  size_t at = 0;
  while (s->state != S_CLOSED && n - at >= 2) {
    const unsigned char *h = (const unsigned char *)p + at;
    int fin = h[0] & 0x80, rsv1 = h[0] & 0x40, op = h[0] & 15;
    uint64_t len = h[1] & 127;
    size_t hl = 2;
    if (len == 126) {
      if (n - at < 4) break;
      len = (h[2] << 8) | h[3];
      hl = 4;
    } else if (len == 127) {
      if (n - at < 10) break;
      len = 0;
      for (int b = 0; b < 8; b++) len = (len << 8) | h[2 + b];
      hl = 10;
    }
    if (h[1] & 0x80) hl += 4; /* a server never masks; skipped if it did */
    if (n - at < hl + len) break;
    const char *body = p + at + hl;
    at += hl + len;
    if (op == 9) {
      ws_send(s, 10, body, len); /* pong */
    } else if (op == 8) {
      int code = len >= 2 ? ((unsigned char)body[0] << 8) | (unsigned char)body[1] : 1005;
      ws_send(s, 8, body, len >= 2 ? 2 : 0);
      sock_close(s, code);
    } else if (op == 1 || op == 2 || op == 0) {
      if (op != 0) s->msg_deflated = rsv1 && s->deflate;
      if (fin && op != 0) {
        on_message(s, body, len, s->msg_deflated, t);
      } else {
        buf_add(&s->msg, body, len);
        if (fin) {
          on_message(s, s->msg.p, s->msg.len, s->msg_deflated, t);
          s->msg.len = 0;
        }
      }
    }
  }
  return at;
}

static void on_upgrade(sock_t *s, double t) {
  char *end = memmem(s->in.p, s->in.len, "\r\n\r\n", 4);
  if (!end) return;
  *end = 0;
  if (strncmp(s->in.p, "HTTP/1.1 101", 12)) die("socket %d: no upgrade: %.200s", s->g, s->in.p);
  for (char *line = strstr(s->in.p, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
    if (!strncasecmp(line + 2, "Sec-WebSocket-Extensions:", 25)) {
      char *eol = strstr(line + 2, "\r\n");
      size_t ln = eol ? (size_t)(eol - line - 2) : strlen(line + 2);
      s->deflate = memmem(line + 2, ln, "permessage-deflate", 18) != NULL;
      s->no_takeover = memmem(line + 2, ln, "server_no_context_takeover", 26) != NULL;
    }
  }
  size_t used = end + 4 - s->in.p;
  buf_drop(&s->in, used);
  s->state = S_HELLO;
  size_t got = on_frames(s, s->in.p, s->in.len, t);
  if (s->state != S_CLOSED) buf_drop(&s->in, got);
}

static void on_readable(sock_t *s) {
  for (;;) {
    ssize_t r = read(s->fd, rbuf, READ_SIZE);
    if (r < 0 && errno == EAGAIN) return;
    if (r <= 0) {
      sock_close(s, 1006);
      return;
    }
    double t = wall();
    if (s->state == S_UPGRADING) {
      buf_add(&s->in, rbuf, r);
      on_upgrade(s, t);
    } else if (s->in.len == 0) { /* no partial frame kept: parsed in place, the rest kept */
      size_t got = on_frames(s, rbuf, r, t);
      if (s->state != S_CLOSED) buf_add(&s->in, rbuf + got, r - got);
    } else {
      buf_add(&s->in, rbuf, r);
      size_t got = on_frames(s, s->in.p, s->in.len, t);
      if (s->state != S_CLOSED) buf_drop(&s->in, got);
    }
    if (s->state == S_CLOSED || r < READ_SIZE) return;
  }
}

static void sock_connect(sock_t *s) {
  int i = s->server;
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
  if (getaddrinfo(cfg.host[i], cfg.port[i], &hints, &ai)) die("getaddrinfo %s", cfg.host[i]);
  s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(s->fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS)
    die("connect: %s", strerror(errno));
  freeaddrinfo(ai);
  unsigned char key[16];
  for (int k = 0; k < 16; k++) key[k] = rnd() & 255;
  char key64[32];
  /* base64 of the 16 random bytes */
  static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  int w = 0;
  for (int k = 0; k < 16; k += 3) {
    uint32_t v = key[k] << 16 | (k + 1 < 16 ? key[k + 1] << 8 : 0) | (k + 2 < 16 ? key[k + 2] : 0);
    key64[w++] = b64[(v >> 18) & 63];
    key64[w++] = b64[(v >> 12) & 63];
    key64[w++] = k + 1 < 16 ? b64[(v >> 6) & 63] : '=';
    key64[w++] = k + 2 < 16 ? b64[v & 63] : '=';
  }
  key64[w] = 0;
  char req[4096];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
                   "Origin: %s\r\nCookie: %s\r\n\r\n",
                   cfg.path[i], cfg.host[i], cfg.port[i], key64, cfg.origin[i], s->cookie);
  buf_add(&s->out, req, n); /* written once connected */
  s->state = S_UPGRADING;
  s->close_code = 0;
  opening++;
  s->watching_out = 1;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = s};
  epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
}

/* -- timers: heartbeats and the phase's sends, found by a scan when the earliest is due -------- */
static void act(sock_t *s, double t) {
  if (ph.kind == K_STORM) {
    send_room(s, "join");
    s->next_act = INFINITY;
  } else if (ph.kind == K_STATES) { /* a sender's k-th state */
    char f[512];
    snprintf(f, sizeof f, "{\"type\":\"roomstate\",\"room\":%s,\"data\":{\"t\":%.6f,\"k\":%d}}",
             ph.room_json, wall(), s->act_k);
    send_text(s, f);
    s->act_k++;
    double offset = (s->g % 7) / (7 * ph.hz); /* senders spread over the tick, as people move */
    double at = ph.start_at + offset + s->act_k / ph.hz;
    s->next_act = at >= ph.start_at + ph.seconds ? INFINITY : at;
  } else if (ph.kind == K_COUNT) {
    if (s->act_k < 0) { /* its join into the count-only room */
      send_room(s, "join");
      s->act_k = 0;
      double period = 2.0 * ph.churners / ph.rate;
      double at = ph.start_at + ((double)s->g / ph.churners) * period;
      s->next_act = s->g < ph.churners && at < ph.start_at + ph.seconds ? at : INFINITY;
    } else { /* a churner leaves and joins again, its turns spread so that all make `rate` */
      send_room(s, s->act_k % 2 == 0 ? "leave" : "join");
      ph.changes++;
      s->act_k++;
      double period = 2.0 * ph.churners / ph.rate;
      double at = ph.start_at + ((double)s->g / ph.churners) * period + s->act_k * period / 2;
      s->next_act = at < ph.start_at + ph.seconds ? at : INFINITY;
    }
  } else {
    s->next_act = INFINITY;
  }
  (void)t;
}

static void timers(double t) {
  if (t < next_due) return;
  double due = INFINITY;
  for (int i = 0; i < n_socks; i++) {
    sock_t *s = &socks[i];
    if (s->state != S_OPEN) continue;
    if (s->next_beat <= t) {
      send_text(s, "{\"type\":\"heartbeat\"}");
      s->next_beat += cfg.beat_every;
      if (s->next_beat <= t) s->next_beat = t + cfg.beat_every; /* a late round: no burst */
    }
    if (s->next_act <= t) act(s, t);
    if (s->retry_at <= t) {
      send_room(s, "join");
      s->retry_at = INFINITY;
    }
    double d = fmin(s->next_beat, fmin(s->next_act, s->retry_at));
    if (d < due) due = d;
  }
  next_due = due;
}

/* -- commands and results ----------------------------------------------------------------------- */
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void client_figures(FILE *f, double cpu0, double sys0) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + sys;
  if (!lags.len) dvec_add(&lags, 0);
  qsort(lags.p, lags.len, sizeof(double), cmp);
  size_t p99 = (size_t)(lags.len * 0.99);
  fprintf(f,
          "\"client\":{\"cpu_s\":%.6f,\"system_s\":%.6f,\"lag_p50\":%.6f,\"lag_p99\":%.6f,"
          "\"lag_max\":%.6f,\"join_retries\":%ld,\"runtime\":\"c\",\"zlib\":\"in the loop\","
          "\"round_ms\":%g}",
          cpu - cpu0, sys - sys0, lags.p[lags.len / 2], lags.p[p99 < lags.len ? p99 : lags.len - 1],
          lags.p[lags.len - 1], retries, cfg.round * 1000);
}

static double cpu_at0, sys_at0;
static void cpu_mark(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  sys_at0 = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  cpu_at0 = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + sys_at0;
  lags.len = 0;
  retries = 0;
}

static int members(sock_t *s) { return s->g < ph.n; }

static void start_phase(const char *line) {
  json_t j = {0};
  if (json_parse(&j, line, (int)strlen(line))) die("a command not JSON: %s", line);
  int phase = j_get(&j, 0, "phase");
  if (phase < 0) die("a command without its phase: %s", line);
  if (tok_is(&j, phase, "quit")) {
    for (int i = 0; i < n_socks; i++) {
      if (socks[i].state == S_OPEN) ws_send(&socks[i], 8, "\x03\xe8", 2);
    }
    usleep(500 * 1000);
    exit(0);
  }
  memset(&ph, 0, sizeof ph);
  int room = j_get(&j, 0, "room");
  ph.room = j_raw(&j, room);
  ph.room_json = xrealloc(NULL, strlen(ph.room) + 3);
  sprintf(ph.room_json, "\"%s\"", ph.room);
  ph.n = (int)j_num(&j, j_get(&j, 0, "n"));
  ph.start_at = j_num(&j, j_get(&j, 0, "start_at"));
  ph.spread = j_num(&j, j_get(&j, 0, "spread"));
  ph.settle = j_num(&j, j_get(&j, 0, "settle"));
  ph.seconds = j_num(&j, j_get(&j, 0, "seconds"));
  ph.hz = j_num(&j, j_get(&j, 0, "hz"));
  ph.rate = j_num(&j, j_get(&j, 0, "rate"));
  ph.senders = (int)j_num(&j, j_get(&j, 0, "senders"));
  ph.churners = (int)j_num(&j, j_get(&j, 0, "churners"));
  ph.end_at = INFINITY;
  ph.counted_at = INFINITY;
  cpu_mark();
  for (int i = 0; i < n_socks; i++) {
    sock_t *s = &socks[i];
    s->frames = s->bytes = 0;
    s->kind = K_NONE;
    s->next_act = s->retry_at = INFINITY;
    s->act_k = 0;
  }
  if (tok_is(&j, phase, "storm")) {
    ph.kind = K_STORM;
    for (int i = 0; i < n_socks; i++) {
      sock_t *s = &socks[i];
      if (!members(s)) continue; /* the others stay out of this room */
      ph.missing++;
      s->kind = K_STORM;
      s->first_at = s->last_at = 0;
      s->snapshot_at = s->full_at = -1;
      if (s->roster) memset(s->roster, 0, s->roster_words * sizeof(uint64_t));
      s->roster_n = 0;
      s->next_act = ph.start_at + ph.spread * s->g / ph.n;
    }
    ph.end_at = ph.missing > 0 ? INFINITY : wall() + 0.5;
    ph.counted_at = ph.start_at + ph.spread + ph.settle; /* the deadline */
  } else if (tok_is(&j, phase, "states")) {
    ph.kind = K_STATES;
    for (int i = 0; i < n_socks; i++) {
      sock_t *s = &socks[i];
      if (!members(s)) continue;
      s->kind = K_STATES;
      s->latencies.len = 0;
      if (s->g < ph.senders) s->next_act = ph.start_at + (s->g % 7) / (7 * ph.hz);
    }
    ph.end_at = ph.start_at + ph.seconds + 1.5; /* the drain */
  } else if (tok_is(&j, phase, "count")) {
    ph.kind = K_COUNT;
    for (int i = 0; i < n_socks; i++) {
      sock_t *s = &socks[i];
      s->kind = K_COUNT;
      s->counted = 0;
      s->act_k = -1;
      s->next_act = ph.start_at - ph.spread - 5 + ph.spread * s->g / ph.n;
    }
    ph.counted_at = ph.start_at; /* joined or not by then; the counts start */
    ph.end_at = ph.start_at + ph.seconds;
  } else {
    die("an unknown phase: %s", line);
  }
  next_due = 0;
  free(j.t);
}

static void print_str(FILE *f, const char *raw) { fprintf(f, "\"%s\"", raw); } /* as escaped */

static uint64_t *roster_of(sock_t *s, int words) { /* s's bitmap widened to `words` */
  static uint64_t *w;
  static int cap;
  if (words > cap) {
    w = xrealloc(w, words * sizeof(uint64_t));
    cap = words;
  }
  memset(w, 0, words * sizeof(uint64_t));
  int have = s->roster_words < words ? s->roster_words : words; /* ids past n_names: none */
  if (s->roster) memcpy(w, s->roster, have * sizeof(uint64_t));
  return w;
}
static int by_name(const void *a, const void *b) {
  return strcmp(names[*(const int *)a], names[*(const int *)b]);
}

static void end_phase(void) {
  FILE *f = stdout;
  for (int i = 0; i < n_socks; i++) socks[i].kind = K_NONE;
  fputc('{', f);
  if (ph.kind == K_STORM) {
    int words = (n_names + 63) / 64;
    uint64_t **distinct = NULL;
    int n_distinct = 0;
    fputs("\"sockets\":[", f);
    int first = 1;
    for (int i = 0; i < n_socks; i++) {
      sock_t *s = &socks[i];
      if (!members(s)) continue;
      uint64_t *mine = roster_of(s, words);
      int k = 0;
      while (k < n_distinct && memcmp(distinct[k], mine, words * sizeof(uint64_t))) k++;
      if (k == n_distinct) {
        distinct = xrealloc(distinct, (n_distinct + 1) * sizeof(uint64_t *));
        distinct[n_distinct] = xrealloc(NULL, words * sizeof(uint64_t) + 1);
        memcpy(distinct[n_distinct++], mine, words * sizeof(uint64_t));
      }
      fprintf(f, "%s[%ld,%ld,", first ? "" : ",", s->frames, s->bytes);
      s->snapshot_at < 0 ? fputs("null,", f) : fprintf(f, "%.6f,", s->snapshot_at);
      s->full_at < 0 ? fputs("null,", f) : fprintf(f, "%.6f,", s->full_at);
      fprintf(f, "%.6f,%.6f,%d]", s->first_at, s->last_at, k);
      first = 0;
    }
    fputs("],\"rosters\":[", f);
    int *ids = xrealloc(NULL, (n_names + 1) * sizeof(int));
    for (int k = 0; k < n_distinct; k++) {
      int m = 0;
      for (int id = 0; id < n_names; id++) {
        if (distinct[k][id / 64] >> (id % 64) & 1) ids[m++] = id;
      }
      qsort(ids, m, sizeof(int), by_name);
      fputs(k ? ",[" : "[", f);
      for (int x = 0; x < m; x++) {
        if (x) fputc(',', f);
        print_str(f, names[ids[x]]);
      }
      fputc(']', f);
      free(distinct[k]);
    }
    free(ids);
    free(distinct);
    fputs("],\"users\":[", f);
    first = 1;
    for (int i = 0; i < n_socks; i++) {
      if (!members(&socks[i])) continue;
      if (!first) fputc(',', f);
      print_str(f, socks[i].user);
      first = 0;
    }
    int closed = 0, codes[5000] = {0};
    for (int i = 0; i < n_socks; i++) {
      if (socks[i].state == S_CLOSED) {
        closed++;
        if (socks[i].close_code > 0 && socks[i].close_code < 5000) codes[socks[i].close_code]++;
      }
    }
    fprintf(f, "],\"closed\":%d,\"close_codes\":{", closed);
    first = 1;
    for (int c = 0; c < 5000; c++) {
      if (codes[c]) {
        fprintf(f, "%s\"%d\":%d", first ? "" : ",", c, codes[c]);
        first = 0;
      }
    }
    fputs("},", f);
  } else if (ph.kind == K_STATES) {
    long frames = 0, bytes = 0;
    fputs("\"latencies\":[", f);
    int first = 1;
    for (int i = 0; i < n_socks; i++) {
      sock_t *s = &socks[i];
      if (!members(s)) continue;
      frames += s->frames;
      bytes += s->bytes;
      for (size_t k = 0; k < s->latencies.len; k++) {
        fprintf(f, first ? "%.6f" : ",%.6f", s->latencies.p[k]);
        first = 0;
      }
      s->latencies.len = 0;
    }
    fprintf(f, "],\"frames\":%ld,\"bytes\":%ld,", frames, bytes);
  } else if (ph.kind == K_COUNT) {
    long frames = 0, bytes = 0;
    int others = 0;
    for (int i = 0; i < n_socks; i++) {
      sock_t *s = &socks[i];
      if (s->g < ph.churners) continue;
      others++;
      frames += s->frames;
      bytes += s->bytes;
    }
    fprintf(f,
            "\"joined\":%s,\"uncounted\":%d,\"changes\":%ld,\"others\":%d,\"frames\":%ld,"
            "\"bytes\":%ld,",
            ph.joined ? "true" : "false", ph.uncounted, ph.changes, others, frames, bytes);
  }
  client_figures(f, cpu_at0, sys_at0);
  fputs("}\n", f);
  fflush(f);
  for (int i = 0; i < n_socks; i++) socks[i].next_act = socks[i].retry_at = INFINITY;
  free(ph.room);
  free(ph.room_json);
  memset(&ph, 0, sizeof ph);
  ph.end_at = ph.counted_at = INFINITY;
}

static void phase_clock(double t) {
  if (ph.kind == K_NONE) return;
  if (t >= ph.counted_at) {
    ph.counted_at = INFINITY;
    if (ph.kind == K_STORM) { /* the deadline: rosters still short stay so */
      if (ph.end_at == INFINITY) ph.end_at = t + 0.5;
    } else if (ph.kind == K_COUNT) {
      for (int i = 0; i < n_socks; i++) {
        ph.uncounted += !socks[i].counted;
        socks[i].frames = socks[i].bytes = 0;
      }
      ph.joined = ph.uncounted == 0;
    }
  }
  if (t >= ph.end_at) end_phase();
}

static void on_stdin(void) {
  char tmp[65536];
  for (;;) {
    ssize_t r = read(0, tmp, sizeof tmp);
    if (r == 0) exit(0); /* the harness went away */
    if (r < 0) break;
    buf_add(&stdin_buf, tmp, r);
  }
  char *nl;
  while (ph.kind == K_NONE && (nl = memchr(stdin_buf.p, '\n', stdin_buf.len))) {
    *nl = 0;
    char *line = strdup(stdin_buf.p);
    buf_drop(&stdin_buf, nl + 1 - stdin_buf.p);
    if (strspn(line, " \t\r") != strlen(line)) start_phase(line);
    free(line);
  }
}

/* -- the loop ------------------------------------------------------------------------------------ */
static void parse_url(const char *url, int i) { /* ws://HOST:PORT/PATH */
  const char *h = strstr(url, "://");
  h = h ? h + 3 : url;
  const char *colon = strchr(h, ':'), *slash = strchr(h, '/');
  if (!colon || !slash || colon > slash) die("a server url without its port: %s", url);
  cfg.host[i] = strndup(h, colon - h);
  cfg.port[i] = strndup(colon + 1, slash - colon - 1);
  cfg.path[i] = strdup(slash);
}

static void load_config(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("%s: %s", path, strerror(errno));
  buf_t b = {0};
  char tmp[65536];
  size_t r;
  while ((r = fread(tmp, 1, sizeof tmp, f)) > 0) buf_add(&b, tmp, r);
  fclose(f);
  json_t j = {0};
  if (json_parse(&j, b.p, (int)b.len)) die("%s: not JSON", path);
  int servers = j_get(&j, 0, "servers"), origin = j_get(&j, 0, "origin");
  int cookies = j_get(&j, 0, "cookies"), globals = j_get(&j, 0, "globals");
  if (servers < 0 || origin < 0 || cookies < 0 || globals < 0) die("%s: incomplete", path);
  for (int k = servers + 1; k < j.t[servers].next; k = j.t[k].next) cfg.n_servers++;
  cfg.host = calloc(cfg.n_servers, sizeof(char *));
  cfg.port = calloc(cfg.n_servers, sizeof(char *));
  cfg.path = calloc(cfg.n_servers, sizeof(char *));
  cfg.origin = calloc(cfg.n_servers, sizeof(char *));
  int i = 0;
  for (int k = servers + 1; k < j.t[servers].next; k = j.t[k].next) {
    char *url = j_str(&j, k);
    parse_url(url, i++);
    free(url);
  }
  i = 0;
  for (int k = origin + 1; k < j.t[origin].next && i < cfg.n_servers; k = j.t[k].next)
    cfg.origin[i++] = j_str(&j, k);
  for (int k = cookies + 1; k < j.t[cookies].next; k = j.t[k].next) n_socks++;
  socks = calloc(n_socks ? n_socks : 1, sizeof(sock_t));
  i = 0;
  for (int k = cookies + 1; k < j.t[cookies].next; k = j.t[k].next) socks[i++].cookie = j_str(&j, k);
  i = 0;
  for (int k = globals + 1; k < j.t[globals].next && i < n_socks; k = j.t[k].next) {
    socks[i].g = (int)j_num(&j, k);
    socks[i].idx = i;
    socks[i].next_act = socks[i].retry_at = INFINITY;
    socks[i].server = socks[i].g % cfg.n_servers;
    i++;
  }
  cfg.probe = j_truthy(&j, j_get(&j, 0, "probe"));
  int be = j_get(&j, 0, "beat_every"), cc = j_get(&j, 0, "connect_concurrency");
  cfg.beat_every = be >= 0 ? j_num(&j, be) : 10;
  cfg.concurrency = cc >= 0 ? (int)j_num(&j, cc) : 50;
  free(j.t);
  buf_free(&b);
}

int main(int argc, char **argv) {
  if (argc < 2) die("usage: %s CONFIG.json", argv[0]);
  load_config(argv[1]);
  const char *round = getenv("BENCH_BIG_ROOMS_C_ROUND_MS");
  cfg.round = (round && *round ? atof(round) : 2.0) / 1000;
  rng_state ^= (uint32_t)getpid() * 2654435761u ^ (uint32_t)(wall() * 1e6);
  setvbuf(stdout, NULL, _IOFBF, 1 << 20);
  ep = epoll_create1(EPOLL_CLOEXEC);
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  ph.kind = K_NONE;
  ph.end_at = ph.counted_at = INFINITY;

  /* open every socket, `concurrency` at a time, each beating from the moment its hello came */
  int next = 0;
  double beat_start = 0;
  struct epoll_event evs[1024];
  int ready = 0, stdin_watched = 0;
  lag_next = INFINITY;
  for (;;) {
    while (!ready && next < n_socks && opening < cfg.concurrency) sock_connect(&socks[next++]);
    if (!ready && opened == n_socks) {
      ready = 1;
      fputs("ready\n", stdout);
      fflush(stdout);
      struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
      epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
      stdin_watched = 1;
      lag_next = wall() + 0.02;
    }
    double t0 = wall();
    double wake = fmin(fmin(next_due, lag_next), fmin(ph.end_at, ph.counted_at));
    int timeout = wake == INFINITY ? 1000 : (int)fmax(0, fmin(1000, ceil((wake - t0) * 1000)));
    int n = epoll_wait(ep, evs, 1024, timeout);
    double t = wall();
    if (t >= lag_next) { /* how late a round wakes past a 20 ms mark (Node's client: a sleep's) */
      dvec_add(&lags, t - lag_next);
      lag_next = t + 0.02;
    }
    for (int k = 0; k < n; k++) {
      sock_t *s = evs[k].data.ptr;
      if (!s) {
        on_stdin();
        continue;
      }
      if (s->state == S_CLOSED) continue;
      if (evs[k].events & EPOLLOUT) flush_out(s);
      if (s->state != S_CLOSED && (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) on_readable(s);
      if (s->state == S_OPEN && s->next_beat == 0) { /* just opened: its beat slot */
        if (!beat_start) beat_start = wall();
        s->next_beat = beat_start + cfg.beat_every * ((s->idx % CHUNKS) + 1) / CHUNKS;
        while (s->next_beat < wall()) s->next_beat += cfg.beat_every;
        s->next_act = s->retry_at = INFINITY;
        if (s->next_beat < next_due) next_due = s->next_beat;
      }
    }
    t = wall();
    timers(t);
    phase_clock(t);
    if (stdin_watched && ph.kind == K_NONE && memchr(stdin_buf.p ? stdin_buf.p : "", '\n', stdin_buf.len))
      on_stdin(); /* a command that came during the last phase */
    if (cfg.round > 0 && ready) { /* the rest of the round: frames gather meanwhile */
      double left = t0 + cfg.round - wall();
      double until = fmin(next_due, fmin(ph.end_at, ph.counted_at)) - wall();
      if (until < left) left = until;
      if (left > 0) {
        struct timespec ts = {0, (long)(left * 1e9)};
        nanosleep(&ts, NULL);
      }
    }
  }
}
