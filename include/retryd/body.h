/* SPDX-License-Identifier: MIT */
/*
 * retryd: request bodies and whether they can be sent again.
 */
#ifndef RETRYD_BODY_H
#define RETRYD_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retryd/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Whether a body can be sent again, strongest first: the numeric order is
 * the order of weakness, so the weakest of two is the larger.
 */
typedef enum retryd_replayability {
    /** The same bytes can be sent again at no cost. */
    RETRYD_REPLAYABLE = 0,
    /** A fresh copy can be opened for each attempt. */
    RETRYD_REOPENABLE = 1,
    /** Once read, gone: no second attempt can carry it. */
    RETRYD_ONE_SHOT = 2,
} retryd_replayability;
#define RETRYD_REPLAYABILITY_COUNT 3

/** The kinds of body of the specification's table. */
typedef enum retryd_body_kind {
    RETRYD_BODY_BYTES = 0,    /**< immutable bytes: REPLAYABLE */
    RETRYD_BODY_DTO = 1,      /**< DTO + deterministic codec: REPLAYABLE */
    RETRYD_BODY_SUPPLIER = 2, /**< reopenable resource: REOPENABLE */
    RETRYD_BODY_STREAM = 3,   /**< a single stream: ONE_SHOT */
    RETRYD_BODY_PUBLISHER_FACTORY = 4, /**< as declared */
    RETRYD_BODY_PUBLISHER = 5,         /**< a publisher instance: ONE_SHOT */
    RETRYD_BODY_MULTIPART = 6,         /**< the weakest of its parts */
    /** multipart/form-data by libcurl's MIME API: the weakest of its
     * parts */
    RETRYD_BODY_MIME = 7,
} retryd_body_kind;
#define RETRYD_BODY_KIND_COUNT 8

/**
 * The replayability of a body kind.
 *
 * @param kind      not MULTIPART or MIME (use retryd_replayability_weakest
 *                  over the parts).
 * @param declared  what a publisher factory declares; ignored otherwise.
 * @param ret       written only on success.
 * @return 0, or RETRYD_EINVAL for MULTIPART, an unknown kind, or an unknown
 *         declared value for a publisher factory.
 */
RETRYD_EXPORT int retryd_body_kind_replayability(retryd_body_kind kind,
                                                 retryd_replayability declared,
                                                 retryd_replayability *ret);

/** The weaker of two replayabilities (a multipart body is its weakest part). */
RETRYD_EXPORT retryd_replayability
retryd_replayability_weakest(retryd_replayability a, retryd_replayability b);

/** A request body, owned by the caller (retryd_body_free()). */
typedef struct retryd_body retryd_body;

/**
 * One attempt's byte stream. read() returns the number of bytes written to
 * @p buf (at most @p len), 0 at the end, or -1 on an error (the attempt then
 * fails with the permanent category body_source). close() (may be NULL) is
 * called once when the attempt is done with it.
 */
typedef struct retryd_body_reader {
    size_t sz; /**< sizeof(retryd_body_reader) (docs/abi.md) */
    long (*read)(void *ctx, void *buf, size_t len);
    void (*close)(void *ctx);
    void *ctx;
    int64_t length; /**< bytes, or -1 when unknown (sent chunked) */
} retryd_body_reader;

/** Opens a fresh reader for one attempt into @p ret, which arrives zeroed
 * with the library's sz (set your own sizeof, as for any struct you fill);
 * 0 or a negative code. */
typedef int (*retryd_body_open_fn)(void *ctx, retryd_body_reader *ret);

/** Encodes a DTO deterministically into a malloc'ed buffer the library
 * frees; 0 or a negative code. */
typedef int (*retryd_body_encode_fn)(const void *dto, void *ctx,
                                     void **ret_data, size_t *ret_len);

/** Immutable bytes, copied: REPLAYABLE. */
RETRYD_EXPORT int retryd_body_new_bytes(const void *data, size_t len,
                                        retryd_body **ret);

/** A DTO and its deterministic encoder (called once, on first use; the
 * bytes are then reused): REPLAYABLE. @p dto must outlive the body. */
RETRYD_EXPORT int retryd_body_new_dto(const void *dto,
                                      retryd_body_encode_fn encode, void *ctx,
                                      retryd_body **ret);

/** A reopenable resource: @p open is called for every attempt:
 * REOPENABLE. */
RETRYD_EXPORT int retryd_body_new_supplier(retryd_body_open_fn open, void *ctx,
                                           retryd_body **ret);

/** A file, reopened for every attempt (a supplier): REOPENABLE. */
RETRYD_EXPORT int retryd_body_new_file(const char *path, retryd_body **ret);

/** A single stream: it can be read once: ONE_SHOT. */
RETRYD_EXPORT int retryd_body_new_stream(const retryd_body_reader *reader,
                                         retryd_body **ret);

/** A publisher factory: a fresh publisher per attempt, with the
 * replayability the caller declares. */
RETRYD_EXPORT int
retryd_body_new_publisher_factory(retryd_body_open_fn create, void *ctx,
                                  retryd_replayability declared,
                                  retryd_body **ret);

/** A publisher instance: ONE_SHOT. */
RETRYD_EXPORT int retryd_body_new_publisher(const retryd_body_reader *reader,
                                            retryd_body **ret);

/**
 * A multipart/form-data body made of @p n parts (1..1024), each with a
 * field name and a content type (NULL: application/octet-stream) of at most
 * 200 bytes, without CR, LF, NUL or '"'. Takes ownership of the parts, even
 * on failure. Its replayability is the weakest part's.
 * @return 0, RETRYD_EINVAL for a name or type that breaks these rules,
 *         RETRYD_ENOMEM.
 */
RETRYD_EXPORT int retryd_body_new_multipart(retryd_body *const *parts,
                                            const char *const *names,
                                            const char *const *content_types,
                                            size_t n, retryd_body **ret);

/**
 * One part of a MIME body (retryd_body_new_mime()): a form field whose
 * content is in memory or in a file, as curl's -F builds one. Strings and
 * data are copied; a file is read again by every attempt.
 */
typedef struct retryd_mime_part {
    size_t sz;        /**< sizeof(retryd_mime_part) (docs/abi.md) */
    const char *name; /**< the field's name; NULL: none */
    /** The content in memory, @p data_len bytes (REPLAYABLE); NULL with
     * @p file set. */
    const void *data;
    size_t data_len;
    /** Or the content of this file, opened by each attempt (REOPENABLE),
     * as curl's -F name=@file: the part announces the file's base name as
     * its filename unless @p filename or @p no_filename says otherwise. */
    const char *file;
    /** The filename the part announces (curl's ;filename=); NULL: a file
     * part's base name, none for data. */
    const char *filename;
    /** The part's Content-Type (curl's ;type=); NULL: libcurl's choice,
     * from the filename's extension (application/octet-stream for a file
     * it does not know), none for data without a filename. */
    const char *content_type;
    /** A file part that announces no filename: its content as a field's
     * value, as curl's -F name=<file. */
    bool no_filename;
} retryd_mime_part;

/**
 * A multipart/form-data body built with libcurl's MIME API.
 * Its @p n parts (1..1024) are encoded by curl_mime_* for each attempt: the
 * boundary, each part's headers and its Content-Type are libcurl's, as
 * curl -F sends them. Its
 * replayability is the weakest part's: REPLAYABLE when every part is in
 * memory, REOPENABLE with a file. A file that cannot be read when an
 * attempt begins fails that attempt before anything is sent (body_source).
 * @return 0, RETRYD_EINVAL (a part without exactly one of data and file,
 *         a type that is not a header value, a part without its sz),
 *         RETRYD_EOPTS (a field this library does not know is set),
 *         RETRYD_ENOMEM.
 */
RETRYD_EXPORT int retryd_body_new_mime(const retryd_mime_part *const *parts,
                                       size_t n, retryd_body **ret);

/** Frees the body (and a multipart's parts); closes nothing the caller
 * still owns. Accepts NULL. */
RETRYD_EXPORT void retryd_body_free(retryd_body *body);

/** The body's replayability, from its kind (and its parts). */
RETRYD_EXPORT retryd_replayability
retryd_body_replayability(const retryd_body *body);

/** The Content-Type the body implies (multipart's boundary), or NULL (a
 * MIME body's is libcurl's, made for each attempt). */
RETRYD_EXPORT const char *retryd_body_content_type(const retryd_body *body);

/** Stable names: "replayable", "reopenable", "one_shot"; "unknown". */
RETRYD_EXPORT const char *retryd_replayability_name(retryd_replayability r);

/** Parse a stable name back. @return 0, or RETRYD_EINVAL. */
RETRYD_EXPORT int retryd_replayability_from_name(const char *name,
                                                 retryd_replayability *ret);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_BODY_H */
