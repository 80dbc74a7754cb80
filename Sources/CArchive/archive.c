#include "CArchive.h"

#include "CSystemShims.h"
#include <pthread.h>

static struct modelc_archive_api api;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

/* Fills api from the library, or records why not. */
static void load(void) {
    static const struct modelc_library_symbol symbols[] = {
        {"archive_read_new", (void **)&api.read_new},
        {"archive_read_support_format_zip", (void **)&api.read_support_format_zip},
        {"archive_read_support_format_tar", (void **)&api.read_support_format_tar},
        {"archive_read_support_filter_gzip", (void **)&api.read_support_filter_gzip},
        {"archive_read_support_filter_xz", (void **)&api.read_support_filter_xz},
        {"archive_read_open_fd", (void **)&api.read_open_fd},
        {"archive_read_next_header", (void **)&api.read_next_header},
        {"archive_read_data", (void **)&api.read_data},
        {"archive_read_free", (void **)&api.read_free},
        {"archive_filter_bytes", (void **)&api.filter_bytes},
        {"archive_errno", (void **)&api.error_number},
        {"archive_error_string", (void **)&api.error_string},
        {"archive_format", (void **)&api.format},
        {"archive_write_new", (void **)&api.write_new},
        {"archive_write_set_format_zip", (void **)&api.write_set_format_zip},
        {"archive_write_set_format_pax_restricted", (void **)&api.write_set_format_pax_restricted},
        {"archive_write_add_filter_gzip", (void **)&api.write_add_filter_gzip},
        {"archive_write_add_filter_xz", (void **)&api.write_add_filter_xz},
        {"archive_write_open_filename", (void **)&api.write_open_filename},
        {"archive_write_header", (void **)&api.write_header},
        {"archive_write_data", (void **)&api.write_data},
        {"archive_write_close", (void **)&api.write_close},
        {"archive_write_free", (void **)&api.write_free},
        {"archive_entry_new", (void **)&api.entry_new},
        {"archive_entry_free", (void **)&api.entry_free},
        {"archive_entry_pathname", (void **)&api.entry_pathname},
        {"archive_entry_pathname_utf8", (void **)&api.entry_pathname_utf8},
        {"archive_entry_hardlink", (void **)&api.entry_hardlink},
        {"archive_entry_hardlink_utf8", (void **)&api.entry_hardlink_utf8},
        {"archive_entry_symlink", (void **)&api.entry_symlink},
        {"archive_entry_symlink_utf8", (void **)&api.entry_symlink_utf8},
        {"archive_entry_filetype", (void **)&api.entry_filetype},
        {"archive_entry_set_pathname", (void **)&api.entry_set_pathname},
        {"archive_entry_set_filetype", (void **)&api.entry_set_filetype},
        {"archive_entry_set_perm", (void **)&api.entry_set_perm},
        {"archive_entry_set_size", (void **)&api.entry_set_size},
        {"archive_entry_set_symlink", (void **)&api.entry_set_symlink},
        {"archive_entry_set_hardlink", (void **)&api.entry_set_hardlink},
        {"archive_entry_set_rdev", (void **)&api.entry_set_rdev},
    };
    loaded = modelc_library_open("libarchive.so.13", symbols, sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

const char *modelc_archive_load(void) {
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

/* pthread_once also orders the reads of api after load() wrote it. */
const struct modelc_archive_api *modelc_archive_api(void) {
    return modelc_archive_load() ? NULL : &api;
}
