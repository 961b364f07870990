/*
 * Config nodes: a YAML document as a small tree in which every node
 * remembers where it came from (file, line, column), so that every error
 * about config can say exactly where the bad value is. Parsing uses
 * libyaml; only plain mappings, sequences and scalars are accepted
 * (anchors and aliases, tags and multiple documents are refused).
 */
#ifndef BATON_CORE_CNODE_H
#define BATON_CORE_CNODE_H

#include <stddef.h>

struct buf;
struct err;

enum cnode_type { CNODE_SCALAR, CNODE_SEQ, CNODE_MAP };

struct cnode {
	enum cnode_type type;
	char *key;   /* the key when this node is a mapping value, else NULL */
	char *value; /* scalar text (CNODE_SCALAR only) */
	int quoted;  /* the scalar was quoted: "2" stays a string */
	struct cnode **kids; /* seq items or map values in document order */
	size_t nr, alloc;
	char *origin; /* "path/config.yaml" or "env BATON_PIPELINE" */
	int line, col; /* 1-based; 0 when the origin has no position */
	/* where the key of a mapping value was written; 0 when unknown */
	int key_line, key_col;
};

/*
 * Parses YAML text. file names it in errors and origins. An empty
 * document gives an empty map. Errors: BATON_EINVAL with
 * "FILE:LINE:COL: what was wrong" in e.
 */
int cnode_parse_yaml(const char *text, size_t len, const char *file,
		     struct cnode **out, struct err *e);

/* New nodes; the strings are copied. */
struct cnode *cnode_new_map(const char *origin, int line, int col);
struct cnode *cnode_new_scalar(const char *value, const char *origin,
			       int line, int col);
struct cnode *cnode_new_seq(const char *origin, int line, int col);
/* Appends kid to a map under key (replacing an existing key) or to a seq. */
void cnode_add(struct cnode *parent, const char *key, struct cnode *kid);
/* Frees a tree; NULL is fine. */
void cnode_free(struct cnode *n);
struct cnode *cnode_dup(const struct cnode *n);

/* The value under key in map n, or NULL (also when n is not a map). */
const struct cnode *cnode_get(const struct cnode *n, const char *key);
/* The node at a dotted path ("workflow.max_review_loops"), or NULL. */
const struct cnode *cnode_path(const struct cnode *n, const char *path);

/*
 * Deep merge: map keys of over replace or merge into base; scalars and
 * sequences of over replace base's whole. over is consumed.
 */
void cnode_merge(struct cnode *base, struct cnode *over);

/* "FILE:LINE:COL" (or the bare origin) for messages, into out. */
void cnode_where(const struct cnode *n, char *out, size_t len);

/*
 * Typed reads with errors that name the place and the key path, e.g.
 * ".baton/config.yaml:4:22: workflow.max_review_loops: expected a
 * non-negative integer, got 'two'". path is only used in messages.
 */
int cnode_expect(const struct cnode *n, enum cnode_type type,
		 const char *path, struct err *e);
int cnode_int(const struct cnode *n, const char *path, long min, long max,
	      long *out, struct err *e);
int cnode_number(const struct cnode *n, const char *path, double min,
		 double max, double *out, struct err *e);
int cnode_bool(const struct cnode *n, const char *path, int *out,
	       struct err *e);
/*
 * Rejects any key of map n not in the NULL-terminated list allowed,
 * naming the key, where it is and what is allowed.
 */
int cnode_check_keys(const struct cnode *n, const char *path,
		     const char *const *allowed, struct err *e);

/*
 * Prints the tree as flattened "path = value    # origin:line" lines, one
 * per scalar, sequences of scalars as [a, b] on one line.
 */
void cnode_dump(const struct cnode *n, struct buf *out);

#endif
