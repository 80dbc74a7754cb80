#ifndef MODELC_CARCHIVE_H
#define MODELC_CARCHIVE_H
/* libarchive (Debian libarchive13), opened with dlopen at the first archive
   rather than linked: commands that unpack nothing do not load it nor the
   compression, XML and ICU libraries it needs. Declared here from libarchive
   3's ABI (soname libarchive.so.13); the archive_* names are static inline
   over a table looked up once, so nothing named archive_* is exported to
   clash with the real library. When it cannot be loaded, every call fails
   (NULL, ARCHIVE_FATAL, -1) and modelc_archive_load() says why. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct archive;
struct archive_entry;

#define ARCHIVE_EOF 1
#define ARCHIVE_OK 0
#define ARCHIVE_RETRY (-10)
#define ARCHIVE_WARN (-20)
#define ARCHIVE_FAILED (-25)
#define ARCHIVE_FATAL (-30)

/* libarchive's entry points modelc uses. */
struct modelc_archive_api {
    struct archive *(*read_new)(void);
    int (*read_support_format_zip)(struct archive *a);
    int (*read_support_format_tar)(struct archive *a);
    int (*read_support_filter_gzip)(struct archive *a);
    int (*read_support_filter_xz)(struct archive *a);
    int (*read_open_fd)(struct archive *a, int fd, size_t block_size);
    int (*read_next_header)(struct archive *a, struct archive_entry **entry);
    ssize_t (*read_data)(struct archive *a, void *buffer, size_t size);
    int (*read_free)(struct archive *a);
    int64_t (*filter_bytes)(struct archive *a, int filter);
    int (*error_number)(struct archive *a);
    const char *(*error_string)(struct archive *a);
    int (*format)(struct archive *a);
    struct archive *(*write_new)(void);
    int (*write_set_format_zip)(struct archive *a);
    int (*write_set_format_pax_restricted)(struct archive *a);
    int (*write_add_filter_gzip)(struct archive *a);
    int (*write_add_filter_xz)(struct archive *a);
    int (*write_open_filename)(struct archive *a, const char *path);
    int (*write_header)(struct archive *a, struct archive_entry *entry);
    ssize_t (*write_data)(struct archive *a, const void *buffer, size_t size);
    int (*write_close)(struct archive *a);
    int (*write_free)(struct archive *a);
    struct archive_entry *(*entry_new)(void);
    void (*entry_free)(struct archive_entry *e);
    const char *(*entry_pathname)(struct archive_entry *e);
    const char *(*entry_pathname_utf8)(struct archive_entry *e);
    const char *(*entry_hardlink)(struct archive_entry *e);
    const char *(*entry_hardlink_utf8)(struct archive_entry *e);
    const char *(*entry_symlink)(struct archive_entry *e);
    const char *(*entry_symlink_utf8)(struct archive_entry *e);
    mode_t (*entry_filetype)(struct archive_entry *e);
    void (*entry_set_pathname)(struct archive_entry *e, const char *path);
    void (*entry_set_filetype)(struct archive_entry *e, unsigned int type);
    void (*entry_set_perm)(struct archive_entry *e, mode_t perm);
    void (*entry_set_size)(struct archive_entry *e, int64_t size);
    void (*entry_set_symlink)(struct archive_entry *e, const char *target);
    void (*entry_set_hardlink)(struct archive_entry *e, const char *target);
    void (*entry_set_rdev)(struct archive_entry *e, dev_t rdev);
};

/* NULL when libarchive.so.13 is loaded (loading it once, thread-safely), otherwise why not. */
const char *modelc_archive_load(void);
/* The table, or NULL when libarchive cannot be loaded. */
const struct modelc_archive_api *modelc_archive_api(void);

static inline struct archive *archive_read_new(void) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_new() : NULL;
}
static inline int archive_read_support_format_zip(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_support_format_zip(a) : ARCHIVE_FATAL;
}
static inline int archive_read_support_format_tar(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_support_format_tar(a) : ARCHIVE_FATAL;
}
static inline int archive_read_support_filter_gzip(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_support_filter_gzip(a) : ARCHIVE_FATAL;
}
static inline int archive_read_support_filter_xz(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_support_filter_xz(a) : ARCHIVE_FATAL;
}
static inline int archive_read_open_fd(struct archive *a, int fd, size_t block_size) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_open_fd(a, fd, block_size) : ARCHIVE_FATAL;
}
static inline int archive_read_next_header(struct archive *a, struct archive_entry **entry) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_next_header(a, entry) : ARCHIVE_FATAL;
}
static inline ssize_t archive_read_data(struct archive *a, void *buffer, size_t size) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_data(a, buffer, size) : -1;
}
static inline int archive_read_free(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->read_free(a) : ARCHIVE_FATAL;
}
static inline int64_t archive_filter_bytes(struct archive *a, int filter) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->filter_bytes(a, filter) : -1;
}
static inline int archive_errno(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->error_number(a) : 0;
}
static inline const char *archive_error_string(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->error_string(a) : NULL;
}
static inline int archive_format(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->format(a) : 0;
}
static inline struct archive *archive_write_new(void) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_new() : NULL;
}
static inline int archive_write_set_format_zip(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_set_format_zip(a) : ARCHIVE_FATAL;
}
static inline int archive_write_set_format_pax_restricted(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_set_format_pax_restricted(a) : ARCHIVE_FATAL;
}
static inline int archive_write_add_filter_gzip(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_add_filter_gzip(a) : ARCHIVE_FATAL;
}
static inline int archive_write_add_filter_xz(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_add_filter_xz(a) : ARCHIVE_FATAL;
}
static inline int archive_write_open_filename(struct archive *a, const char *path) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_open_filename(a, path) : ARCHIVE_FATAL;
}
static inline int archive_write_header(struct archive *a, struct archive_entry *entry) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_header(a, entry) : ARCHIVE_FATAL;
}
static inline ssize_t archive_write_data(struct archive *a, const void *buffer, size_t size) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_data(a, buffer, size) : -1;
}
static inline int archive_write_close(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_close(a) : ARCHIVE_FATAL;
}
static inline int archive_write_free(struct archive *a) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->write_free(a) : ARCHIVE_FATAL;
}
static inline struct archive_entry *archive_entry_new(void) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_new() : NULL;
}
static inline void archive_entry_free(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_free(e);
}
static inline const char *archive_entry_pathname(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_pathname(e) : NULL;
}
static inline const char *archive_entry_pathname_utf8(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_pathname_utf8(e) : NULL;
}
static inline const char *archive_entry_hardlink(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_hardlink(e) : NULL;
}
static inline const char *archive_entry_hardlink_utf8(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_hardlink_utf8(e) : NULL;
}
static inline const char *archive_entry_symlink(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_symlink(e) : NULL;
}
static inline const char *archive_entry_symlink_utf8(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_symlink_utf8(e) : NULL;
}
static inline mode_t archive_entry_filetype(struct archive_entry *e) {
    const struct modelc_archive_api *api = modelc_archive_api();
    return api ? api->entry_filetype(e) : 0;
}
static inline void archive_entry_set_pathname(struct archive_entry *e, const char *path) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_set_pathname(e, path);
}
static inline void archive_entry_set_filetype(struct archive_entry *e, unsigned int type) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_set_filetype(e, type);
}
static inline void archive_entry_set_perm(struct archive_entry *e, mode_t perm) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_set_perm(e, perm);
}
static inline void archive_entry_set_size(struct archive_entry *e, int64_t size) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_set_size(e, size);
}
static inline void archive_entry_set_symlink(struct archive_entry *e, const char *target) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_set_symlink(e, target);
}
static inline void archive_entry_set_hardlink(struct archive_entry *e, const char *target) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_set_hardlink(e, target);
}
static inline void archive_entry_set_rdev(struct archive_entry *e, dev_t rdev) {
    const struct modelc_archive_api *api = modelc_archive_api();
    if (api) api->entry_set_rdev(e, rdev);
}
#endif
