/*
 * crashfs: a FUSE file system (low-level API, in memory) that models what a
 * power cut keeps, for the power-cut tests (test/powercut/README.md).
 *
 * Everything a process does lands in the live tree at once, and is logged.
 * Only fsync makes it durable: fsync of a file makes that file's writes and
 * truncations durable, fsync of a directory its entry changes (create,
 * mkdir, unlink, rmdir, rename): what POSIX promises, no more (ext4 often
 * gives more; a program that relies on that breaks elsewhere). A power cut
 * (an armed count of operations, or the "cut" command) fails every later
 * operation with EIO, as a dead disk would. "remount" then rebuilds the tree
 * from the durable operations plus, by variant, some of the rest (the
 * LazyFS and ALICE approach):
 *   drop    nothing that was not fsynced
 *   prefix  a random prefix (seeded) of the operations not fsynced, in order
 *   nodata  every entry change (renames, creates, unlinks) but no data that
 *           was not fsynced: a rename persisted without its file's data
 * The control file /.crashfs takes one command per write and answers the
 * last one on read: "arm N", "cut", "status", "remount VARIANT SEED".
 *
 * Usage: crashfs MOUNTPOINT (runs in the foreground, single-threaded; ends
 * when unmounted or on SIGTERM). Needs /dev/fuse (root, or fusermount3).
 */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CTL_NAME  "/.crashfs"
#define CTL_INO   2u
#define MAX_NODES 200000u
#define MAX_FILE  (64u << 20) /* one file's size: the tests write far less */
#define MAX_LOG   2000000u

typedef struct entry {
    char *name;
    uint32_t ino;
} entry;

typedef struct node {
    mode_t mode; /* 0: no such node */
    uint8_t *data;
    size_t size, cap;
    entry *ents;
    size_t n_ents, cap_ents;
} node;

typedef struct tree {
    node *nodes; /* indexed by ino; 0 and CTL_INO unused */
    size_t n;
} tree;

typedef enum { OP_WRITE, OP_TRUNC, OP_LINK, OP_UNLINK, OP_RENAME } op_kind;

typedef struct op {
    op_kind kind;
    bool durable;
    uint32_t ino;       /* WRITE/TRUNC: the file; LINK/RENAME: the entry's node */
    uint32_t dir, dir2; /* LINK/UNLINK: dir; RENAME: from dir, to dir2 */
    char *name, *name2; /* LINK/UNLINK: name; RENAME: from name, to name2 */
    uint64_t off, len;  /* WRITE: where and how much; TRUNC: the size in off */
    uint8_t *bytes;     /* WRITE */
} op;

static tree live, base; /* base: the tree at the last remount; live = base + log */
static op *ops;
static size_t n_ops, cap_ops;
static long armed = 0; /* > 0: the cut comes at that many more counted operations */
static bool cut = false;
static char reply[256] = "ready\n";
static uint64_t counted = 0;

static void die(const char *what)
{
    fprintf(stderr, "crashfs: %s\n", what);
    exit(1);
}

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *q = realloc(p, c * size);
    if (q == NULL) die("out of memory");
    *cap = c;
    return q;
}

/* ---- trees ---------------------------------------------------------------------- */

static node *node_at(tree *t, uint32_t ino)
{
    return ino < t->n && t->nodes[ino].mode != 0 ? &t->nodes[ino] : NULL;
}

/* The node `ino` in t, made (empty, with live's mode) when missing. */
static node *ensure(tree *t, uint32_t ino, mode_t mode)
{
    if (ino >= t->n) {
        size_t n = t->n ? t->n : 16;
        while (n <= ino) n *= 2;
        node *grown = realloc(t->nodes, n * sizeof *grown);
        if (grown == NULL) die("out of memory");
        memset(grown + t->n, 0, (n - t->n) * sizeof *grown);
        t->nodes = grown;
        t->n = n;
    }
    if (t->nodes[ino].mode == 0) t->nodes[ino].mode = mode;
    return &t->nodes[ino];
}

static entry *find(node *dir, const char *name)
{
    for (size_t i = 0; i < dir->n_ents; i++)
        if (strcmp(dir->ents[i].name, name) == 0) return &dir->ents[i];
    return NULL;
}

static void set_entry(node *dir, const char *name, uint32_t ino)
{
    entry *e = find(dir, name);
    if (e != NULL) {
        e->ino = ino;
        return;
    }
    dir->ents = grow(dir->ents, &dir->cap_ents, dir->n_ents + 1, sizeof *dir->ents);
    dir->ents[dir->n_ents].name = strdup(name);
    if (dir->ents[dir->n_ents].name == NULL) die("out of memory");
    dir->ents[dir->n_ents++].ino = ino;
}

static void drop_entry(node *dir, const char *name)
{
    entry *e = find(dir, name);
    if (e == NULL) return;
    free(e->name);
    *e = dir->ents[--dir->n_ents];
}

static void file_resize(node *f, uint64_t size)
{
    if (size > f->size) {
        f->data = grow(f->data, &f->cap, size, 1);
        memset(f->data + f->size, 0, size - f->size);
    }
    f->size = size;
}

static void file_write(node *f, uint64_t off, const uint8_t *bytes, uint64_t len)
{
    if (off + len > f->size) file_resize(f, off + len);
    memcpy(f->data + off, bytes, len);
}

static void tree_free(tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->nodes[i].data);
        for (size_t j = 0; j < t->nodes[i].n_ents; j++) free(t->nodes[i].ents[j].name);
        free(t->nodes[i].ents);
    }
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

static void tree_copy(tree *to, const tree *from)
{
    tree_free(to);
    to->n = from->n;
    to->nodes = calloc(from->n ? from->n : 1, sizeof *to->nodes);
    if (to->nodes == NULL) die("out of memory");
    for (size_t i = 0; i < from->n; i++) {
        const node *s = &from->nodes[i];
        node *d = &to->nodes[i];
        d->mode = s->mode;
        if (s->size > 0) {
            d->data = malloc(s->size);
            if (d->data == NULL) die("out of memory");
            memcpy(d->data, s->data, s->size);
            d->size = d->cap = s->size;
        }
        for (size_t j = 0; j < s->n_ents; j++) set_entry(d, s->ents[j].name, s->ents[j].ino);
    }
}

/* Applies one logged operation to t (live or a crash image): tolerant of a
 * missing source, since an image may keep an operation without the ones
 * before it. */
static void apply(tree *t, const op *o)
{
    mode_t mode = o->ino < live.n ? live.nodes[o->ino].mode : (S_IFREG | 0644);
    switch (o->kind) {
    case OP_WRITE: file_write(ensure(t, o->ino, mode), o->off, o->bytes, o->len); break;
    case OP_TRUNC: file_resize(ensure(t, o->ino, mode), o->off); break;
    case OP_LINK:
        ensure(t, o->ino, mode);
        set_entry(ensure(t, o->dir, S_IFDIR | 0755), o->name, o->ino);
        break;
    case OP_UNLINK: {
        node *dir = node_at(t, o->dir);
        if (dir != NULL) drop_entry(dir, o->name);
        break;
    }
    case OP_RENAME: {
        node *from = node_at(t, o->dir);
        entry *e = from != NULL ? find(from, o->name) : NULL;
        if (e != NULL && e->ino == o->ino) drop_entry(from, o->name);
        ensure(t, o->ino, mode);
        set_entry(ensure(t, o->dir2, S_IFDIR | 0755), o->name2, o->ino);
        break;
    }
    }
}

static void log_op(op o)
{
    if (n_ops == MAX_LOG) die("operation log full");
    ops = grow(ops, &cap_ops, n_ops + 1, sizeof *ops);
    ops[n_ops++] = o;
    apply(&live, &ops[n_ops - 1]);
}

static void log_clear(void)
{
    for (size_t i = 0; i < n_ops; i++) {
        free(ops[i].name);
        free(ops[i].name2);
        free(ops[i].bytes);
    }
    n_ops = 0;
}

static bool is_data(const op *o)
{
    return o->kind == OP_WRITE || o->kind == OP_TRUNC;
}

static void make_durable(uint32_t ino)
{
    bool dir = S_ISDIR(live.nodes[ino].mode);
    for (size_t i = 0; i < n_ops; i++) {
        op *o = &ops[i];
        if (dir ? (!is_data(o) && (o->dir == ino || (o->kind == OP_RENAME && o->dir2 == ino)))
                : (is_data(o) && o->ino == ino))
            o->durable = true;
    }
}

/* ---- the power cut ---------------------------------------------------------------- */

/* True when the operation may run; false once the power is off. */
static bool powered(void)
{
    if (cut) return false;
    counted++;
    if (armed > 0 && --armed == 0) {
        cut = true;
        return false;
    }
    return true;
}

/* Frees what no name reaches any more (unlinked files keep their data
 * until here, as open files would), so the trees stay small. */
static void collect_unreachable(tree *t)
{
    bool *seen = calloc(t->n, sizeof *seen);
    uint32_t *stack = calloc(t->n, sizeof *stack);
    if (seen == NULL || stack == NULL) die("out of memory");
    size_t depth = 0;
    stack[depth++] = FUSE_ROOT_ID;
    seen[FUSE_ROOT_ID] = true;
    while (depth > 0) {
        node *n = &t->nodes[stack[--depth]];
        for (size_t i = 0; i < n->n_ents; i++) {
            uint32_t ino = n->ents[i].ino;
            if (ino < t->n && !seen[ino]) {
                seen[ino] = true;
                stack[depth++] = ino;
            }
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        if (seen[i]) continue;
        node *n = &t->nodes[i];
        free(n->data);
        for (size_t j = 0; j < n->n_ents; j++) free(n->ents[j].name);
        free(n->ents);
        memset(n, 0, sizeof *n);
    }
    free(seen);
    free(stack);
}

static uint64_t rng_state;
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void remount(const char *variant, uint64_t seed)
{
    size_t pending = 0;
    for (size_t i = 0; i < n_ops; i++) pending += !ops[i].durable;
    rng_state = seed;
    size_t keep_prefix = pending > 0 ? (size_t)(rng_next() % (pending + 1)) : 0;
    bool prefix = strcmp(variant, "prefix") == 0, nodata = strcmp(variant, "nodata") == 0;
    if (!prefix && !nodata && strcmp(variant, "drop") != 0) {
        snprintf(reply, sizeof reply, "error: unknown variant %.32s\n", variant);
        return;
    }
    tree image = { 0 };
    tree_copy(&image, &base);
    size_t seen = 0, kept = 0;
    for (size_t i = 0; i < n_ops; i++) {
        bool keep = ops[i].durable;
        if (!ops[i].durable) {
            if (prefix) keep = seen < keep_prefix;
            if (nodata) keep = !is_data(&ops[i]);
            seen++;
            kept += keep;
        }
        if (keep) apply(&image, &ops[i]);
    }
    collect_unreachable(&image);
    tree_copy(&live, &image); /* inode numbers go on from next_ino: never reused */
    tree_copy(&base, &image);
    tree_free(&image);
    log_clear();
    snprintf(reply, sizeof reply, "ok pending=%zu kept=%zu\n", pending, kept);
    cut = false;
    armed = 0;
}

static void control(const char *cmd)
{
    long n;
    char variant[32];
    unsigned long long seed;
    if (sscanf(cmd, "arm %ld", &n) == 1 && n >= 0) {
        armed = n;
        snprintf(reply, sizeof reply, "ok\n");
    } else if (strncmp(cmd, "cut", 3) == 0) {
        cut = true;
        snprintf(reply, sizeof reply, "ok\n");
    } else if (strncmp(cmd, "status", 6) == 0) {
        snprintf(reply, sizeof reply, "cut=%d ops=%" PRIu64 " log=%zu\n", cut ? 1 : 0, counted,
                 n_ops);
    } else if (sscanf(cmd, "remount %31s %llu", variant, &seed) == 2) {
        remount(variant, seed);
    } else {
        snprintf(reply, sizeof reply, "error: unknown command\n");
    }
}

/* ---- FUSE ---------------------------------------------------------------------------- */

static uint32_t next_ino = 3;

static void fill_attr(uint32_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_uid = getuid();
    st->st_gid = getgid();
    if (ino == CTL_INO) {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        return;
    }
    node *n = &live.nodes[ino];
    st->st_mode = n->mode;
    st->st_nlink = S_ISDIR(n->mode) ? 2 : 1;
    st->st_size = (off_t)n->size;
    st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
    st->st_blksize = 4096;
}

static void reply_entry(fuse_req_t req, uint32_t ino)
{
    struct fuse_entry_param e = { .ino = ino, .attr_timeout = 0, .entry_timeout = 0 };
    fill_attr(ino, &e.attr);
    fuse_reply_entry(req, &e);
}

static node *dir_or_error(fuse_req_t req, fuse_ino_t parent)
{
    node *dir = node_at(&live, (uint32_t)parent);
    if (dir == NULL || !S_ISDIR(dir->mode)) {
        fuse_reply_err(req, dir == NULL ? ENOENT : ENOTDIR);
        return NULL;
    }
    return dir;
}

static bool bad_name(fuse_req_t req, const char *name)
{
    if (strlen(name) > 255) {
        fuse_reply_err(req, ENAMETOOLONG);
        return true;
    }
    return false;
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE; /* every write reaches us */
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    if (parent == FUSE_ROOT_ID && strcmp(name, CTL_NAME + 1) == 0) return reply_entry(req, CTL_INO);
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *dir = dir_or_error(req, parent);
    if (dir == NULL) return;
    entry *e = find(dir, name);
    if (e == NULL) {
        struct fuse_entry_param none = { .ino = 0, .entry_timeout = 0 };
        return (void)fuse_reply_entry(req, &none);
    }
    reply_entry(req, e->ino);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    if (ino != CTL_INO && cut) return (void)fuse_reply_err(req, EIO);
    if (ino != CTL_INO && node_at(&live, (uint32_t)ino) == NULL)
        return (void)fuse_reply_err(req, ENOENT);
    struct stat st;
    fill_attr((uint32_t)ino, &st);
    fuse_reply_attr(req, &st, 0);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    if (ino == CTL_INO) return fs_getattr(req, ino, fi);
    node *n = node_at(&live, (uint32_t)ino);
    if (n == NULL) return (void)fuse_reply_err(req, ENOENT);
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if (!S_ISREG(n->mode)) return (void)fuse_reply_err(req, EISDIR);
        if ((uint64_t)attr->st_size > MAX_FILE) return (void)fuse_reply_err(req, EFBIG);
        if (!powered()) return (void)fuse_reply_err(req, EIO);
        log_op((op){ .kind = OP_TRUNC, .ino = (uint32_t)ino, .off = (uint64_t)attr->st_size });
    } else if (cut) {
        return (void)fuse_reply_err(req, EIO);
    }
    if (to_set & FUSE_SET_ATTR_MODE) n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
    fs_getattr(req, ino, fi);
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *dir = dir_or_error(req, parent);
    if (dir == NULL || bad_name(req, name)) return;
    entry *e = find(dir, name);
    if (e != NULL) {
        /* open(O_CREAT) without O_EXCL of an existing file opens it */
        if (fi != NULL && !(fi->flags & O_EXCL) && S_ISREG(live.nodes[e->ino].mode)) {
            struct fuse_entry_param ep = { .ino = e->ino };
            fill_attr(e->ino, &ep.attr);
            return (void)fuse_reply_create(req, &ep, fi);
        }
        return (void)fuse_reply_err(req, EEXIST);
    }
    if (next_ino >= MAX_NODES) return (void)fuse_reply_err(req, ENOSPC);
    if (!powered()) return (void)fuse_reply_err(req, EIO);
    uint32_t ino = next_ino++;
    ensure(&live, ino, mode);
    char *copy = strdup(name);
    if (copy == NULL) die("out of memory");
    log_op((op){ .kind = OP_LINK, .ino = ino, .dir = (uint32_t)parent, .name = copy });
    struct fuse_entry_param ep = { .ino = ino };
    fill_attr(ino, &ep.attr);
    if (fi != NULL)
        fuse_reply_create(req, &ep, fi);
    else
        fuse_reply_entry(req, &ep);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    make_node(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    make_node(req, parent, name, S_IFREG | (mode & 07777), fi);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, bool want_dir)
{
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *dir = dir_or_error(req, parent);
    if (dir == NULL) return;
    entry *e = find(dir, name);
    if (e == NULL) return (void)fuse_reply_err(req, ENOENT);
    node *n = &live.nodes[e->ino];
    if (want_dir && !S_ISDIR(n->mode)) return (void)fuse_reply_err(req, ENOTDIR);
    if (!want_dir && S_ISDIR(n->mode)) return (void)fuse_reply_err(req, EISDIR);
    if (want_dir && n->n_ents > 0) return (void)fuse_reply_err(req, ENOTEMPTY);
    if (!powered()) return (void)fuse_reply_err(req, EIO);
    char *copy = strdup(name);
    if (copy == NULL) die("out of memory");
    log_op((op){ .kind = OP_UNLINK, .ino = e->ino, .dir = (uint32_t)parent, .name = copy });
    fuse_reply_err(req, 0);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    remove_entry(req, parent, name, false);
}

static void fs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    remove_entry(req, parent, name, true);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    if (flags != 0) return (void)fuse_reply_err(req, EINVAL);
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *from = dir_or_error(req, parent);
    if (from == NULL) return;
    node *to = dir_or_error(req, newparent);
    if (to == NULL || bad_name(req, newname)) return;
    entry *e = find(from, name);
    if (e == NULL) return (void)fuse_reply_err(req, ENOENT);
    uint32_t ino = e->ino;
    entry *old = find(to, newname);
    if (old != NULL && old->ino == ino) return (void)fuse_reply_err(req, 0);
    if (old != NULL && S_ISDIR(live.nodes[old->ino].mode) && live.nodes[old->ino].n_ents > 0)
        return (void)fuse_reply_err(req, ENOTEMPTY);
    if (!powered()) return (void)fuse_reply_err(req, EIO);
    char *a = strdup(name), *b = strdup(newname);
    if (a == NULL || b == NULL) die("out of memory");
    log_op((op){ .kind = OP_RENAME,
                 .ino = ino,
                 .dir = (uint32_t)parent,
                 .name = a,
                 .dir2 = (uint32_t)newparent,
                 .name2 = b });
    fuse_reply_err(req, 0);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (ino == CTL_INO) {
        fi->direct_io = 1;
        return (void)fuse_reply_open(req, fi);
    }
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *n = node_at(&live, (uint32_t)ino);
    if (n == NULL) return (void)fuse_reply_err(req, ENOENT);
    if (S_ISDIR(n->mode)) return (void)fuse_reply_err(req, EISDIR);
    fi->keep_cache = 0; /* a remount changes what a file holds */
    fuse_reply_open(req, fi);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)fi;
    if (ino == CTL_INO) {
        size_t len = strlen(reply);
        if ((size_t)off >= len) return (void)fuse_reply_buf(req, NULL, 0);
        return (void)fuse_reply_buf(req, reply + off,
                                    size < len - (size_t)off ? size : len - (size_t)off);
    }
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *n = node_at(&live, (uint32_t)ino);
    if (n == NULL) return (void)fuse_reply_err(req, ENOENT);
    if ((uint64_t)off >= n->size) return (void)fuse_reply_buf(req, NULL, 0);
    size_t left = n->size - (size_t)off;
    fuse_reply_buf(req, (const char *)n->data + off, size < left ? size : left);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)fi;
    if (ino == CTL_INO) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "%.*s", (int)(size < sizeof cmd - 1 ? size : sizeof cmd - 1),
                 buf);
        control(cmd);
        return (void)fuse_reply_write(req, size);
    }
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *n = node_at(&live, (uint32_t)ino);
    if (n == NULL) return (void)fuse_reply_err(req, ENOENT);
    if ((uint64_t)off + size > MAX_FILE) return (void)fuse_reply_err(req, EFBIG);
    if (!powered()) return (void)fuse_reply_err(req, EIO);
    uint8_t *bytes = malloc(size ? size : 1);
    if (bytes == NULL) die("out of memory");
    memcpy(bytes, buf, size);
    log_op((op){ .kind = OP_WRITE,
                 .ino = (uint32_t)ino,
                 .off = (uint64_t)off,
                 .len = size,
                 .bytes = bytes });
    fuse_reply_write(req, size);
}

static void fs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)datasync;
    (void)fi;
    if (ino == CTL_INO) return (void)fuse_reply_err(req, 0);
    if (node_at(&live, (uint32_t)ino) == NULL) return (void)fuse_reply_err(req, ENOENT);
    if (!powered()) return (void)fuse_reply_err(req, EIO);
    make_durable((uint32_t)ino);
    fuse_reply_err(req, 0);
}

static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0); /* close() promises nothing durable */
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *n = node_at(&live, (uint32_t)ino);
    if (n == NULL) return (void)fuse_reply_err(req, ENOENT);
    if (!S_ISDIR(n->mode)) return (void)fuse_reply_err(req, ENOTDIR);
    fuse_reply_open(req, fi);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    if (cut) return (void)fuse_reply_err(req, EIO);
    node *dir = dir_or_error(req, ino);
    if (dir == NULL) return;
    char *buf = malloc(size);
    if (buf == NULL) return (void)fuse_reply_err(req, ENOMEM);
    size_t used = 0;
    /* offsets: 1 ".", 2 "..", 3+i entry i */
    for (off_t i = off; i < (off_t)dir->n_ents + 2; i++) {
        struct stat st = { 0 };
        const char *name;
        if (i == 0) {
            name = ".";
            st.st_ino = ino;
            st.st_mode = S_IFDIR;
        } else if (i == 1) {
            name = "..";
            st.st_ino = FUSE_ROOT_ID;
            st.st_mode = S_IFDIR;
        } else {
            entry *e = &dir->ents[i - 2];
            name = e->name;
            st.st_ino = e->ino;
            st.st_mode = live.nodes[e->ino].mode & S_IFMT;
        }
        size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
        if (need > size - used) break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void fs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    fs_fsync(req, ino, datasync, fi);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs st = { .f_bsize = 4096,
                          .f_frsize = 4096,
                          .f_blocks = 1u << 20,
                          .f_bfree = 1u << 19,
                          .f_bavail = 1u << 19,
                          .f_files = MAX_NODES,
                          .f_ffree = MAX_NODES - next_ino,
                          .f_namemax = 255 };
    fuse_reply_statfs(req, &st);
}

static const struct fuse_lowlevel_ops fs_ops = {
    .init = fs_init,
    .lookup = fs_lookup,
    .getattr = fs_getattr,
    .setattr = fs_setattr,
    .mkdir = fs_mkdir,
    .create = fs_create,
    .unlink = fs_unlink,
    .rmdir = fs_rmdir,
    .rename = fs_rename,
    .open = fs_open,
    .read = fs_read,
    .write = fs_write,
    .flush = fs_flush,
    .fsync = fs_fsync,
    .opendir = fs_opendir,
    .readdir = fs_readdir,
    .fsyncdir = fs_fsyncdir,
    .statfs = fs_statfs,
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: crashfs MOUNTPOINT\n");
        return 2;
    }
    ensure(&live, FUSE_ROOT_ID, S_IFDIR | 0755);
    tree_copy(&base, &live);
    char *fuse_argv[] = { argv[0], "-o", "fsname=crashfs,subtype=crashfs", NULL };
    struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
    struct fuse_session *se = fuse_session_new(&args, &fs_ops, sizeof fs_ops, NULL);
    if (se == NULL) return 1;
    if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0) {
        fuse_session_destroy(se);
        return 1;
    }
    int rc = fuse_session_loop(se);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    tree_free(&live);
    tree_free(&base);
    log_clear();
    free(ops);
    return rc != 0 ? 1 : 0;
}
