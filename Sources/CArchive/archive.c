#include "CArchive.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct modelc_archive_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

/* Fills api from the library, or records why not. */
static void load(void) {
    static const char library[] = "libarchive.so.13";
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *reason = dlerror();
        snprintf(failure, sizeof failure, "%s", reason ? reason : "libarchive.so.13: cannot be opened");
        return;
    }
    static const struct { const char *name; size_t offset; } symbols[] = {
        {"archive_read_new", offsetof(struct modelc_archive_api, read_new)},
        {"archive_read_support_format_zip", offsetof(struct modelc_archive_api, read_support_format_zip)},
        {"archive_read_support_format_tar", offsetof(struct modelc_archive_api, read_support_format_tar)},
        {"archive_read_support_filter_gzip", offsetof(struct modelc_archive_api, read_support_filter_gzip)},
        {"archive_read_support_filter_xz", offsetof(struct modelc_archive_api, read_support_filter_xz)},
        {"archive_read_open_fd", offsetof(struct modelc_archive_api, read_open_fd)},
        {"archive_read_next_header", offsetof(struct modelc_archive_api, read_next_header)},
        {"archive_read_data", offsetof(struct modelc_archive_api, read_data)},
        {"archive_read_free", offsetof(struct modelc_archive_api, read_free)},
        {"archive_filter_bytes", offsetof(struct modelc_archive_api, filter_bytes)},
        {"archive_errno", offsetof(struct modelc_archive_api, errno)},
        {"archive_error_string", offsetof(struct modelc_archive_api, error_string)},
        {"archive_format", offsetof(struct modelc_archive_api, format)},
        {"archive_write_new", offsetof(struct modelc_archive_api, write_new)},
        {"archive_write_set_format_zip", offsetof(struct modelc_archive_api, write_set_format_zip)},
        {"archive_write_set_format_pax_restricted", offsetof(struct modelc_archive_api, write_set_format_pax_restricted)},
        {"archive_write_add_filter_gzip", offsetof(struct modelc_archive_api, write_add_filter_gzip)},
        {"archive_write_add_filter_xz", offsetof(struct modelc_archive_api, write_add_filter_xz)},
        {"archive_write_open_filename", offsetof(struct modelc_archive_api, write_open_filename)},
        {"archive_write_header", offsetof(struct modelc_archive_api, write_header)},
        {"archive_write_data", offsetof(struct modelc_archive_api, write_data)},
        {"archive_write_close", offsetof(struct modelc_archive_api, write_close)},
        {"archive_write_free", offsetof(struct modelc_archive_api, write_free)},
        {"archive_entry_new", offsetof(struct modelc_archive_api, entry_new)},
        {"archive_entry_free", offsetof(struct modelc_archive_api, entry_free)},
        {"archive_entry_pathname", offsetof(struct modelc_archive_api, entry_pathname)},
        {"archive_entry_pathname_utf8", offsetof(struct modelc_archive_api, entry_pathname_utf8)},
        {"archive_entry_hardlink", offsetof(struct modelc_archive_api, entry_hardlink)},
        {"archive_entry_hardlink_utf8", offsetof(struct modelc_archive_api, entry_hardlink_utf8)},
        {"archive_entry_symlink", offsetof(struct modelc_archive_api, entry_symlink)},
        {"archive_entry_symlink_utf8", offsetof(struct modelc_archive_api, entry_symlink_utf8)},
        {"archive_entry_filetype", offsetof(struct modelc_archive_api, entry_filetype)},
        {"archive_entry_set_pathname", offsetof(struct modelc_archive_api, entry_set_pathname)},
        {"archive_entry_set_filetype", offsetof(struct modelc_archive_api, entry_set_filetype)},
        {"archive_entry_set_perm", offsetof(struct modelc_archive_api, entry_set_perm)},
        {"archive_entry_set_size", offsetof(struct modelc_archive_api, entry_set_size)},
        {"archive_entry_set_symlink", offsetof(struct modelc_archive_api, entry_set_symlink)},
        {"archive_entry_set_hardlink", offsetof(struct modelc_archive_api, entry_set_hardlink)},
        {"archive_entry_set_rdev", offsetof(struct modelc_archive_api, entry_set_rdev)},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        void *address = dlsym(handle, symbols[i].name);
        if (!address) {
            snprintf(failure, sizeof failure, "%s: no symbol %s", library, symbols[i].name);
            return;
        }
        memcpy((char *)&api + symbols[i].offset, &address, sizeof address);
    }
    loaded = 1;
}

const char *modelc_archive_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

/* pthread_once also orders the reads of api after load() wrote it. */
const struct modelc_archive_api *modelc_archive_api(void) {
    return modelc_archive_load() ? NULL : &api;
}
