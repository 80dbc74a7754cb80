#ifndef MODELC_CSYSTEMSHIMS_H
#define MODELC_CSYSTEMSHIMS_H

/* Linux system calls that Swift's Glibc module does not expose. */

/* Atomically swaps the directory entries `from` and `to` (renameat2 with
   RENAME_EXCHANGE). Returns 0, or -1 with errno set. */
int modelc_rename_exchange(const char *from, const char *to);

/* Connects a new AF_UNIX stream socket to the socket file at `path` and makes
   it non-blocking and close-on-exec. Returns the socket, or -1 with errno set
   (ENAMETOOLONG when `path` does not fit a socket address). */
int modelc_connect_unix(const char *path);

/* A pipe whose two ends are non-blocking and close-on-exec (pipe2). Returns 0,
   or -1 with errno set. */
int modelc_pipe_nonblocking(int fds[2]);

/* The file system type (statfs f_type, a magic number from linux/magic.h) of
   the file open as `fd`, or -1 with errno set (fstatfs). */
long modelc_file_system_type(int fd);

#include <stddef.h>
#include <stdint.h>

/* Copies up to `length` bytes from `in` to `out` at their file offsets inside
   the kernel (copy_file_range). Returns the bytes copied (0 at the end of
   `in`), or -1 with errno set (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP where the
   kernel or file system cannot). */
long modelc_copy_file_range(int in, int out, size_t length);

/* Starts writing `length` bytes of `fd` from `offset` back to the disk
   without waiting for them (sync_file_range with SYNC_FILE_RANGE_WRITE), so a
   later fsync has less to wait for. Returns 0, or -1 with errno set. */
int modelc_start_writeback(int fd, long long offset, long long length);

/* An entry point to look up in a shared library, and where to put it. */
struct modelc_library_symbol {
    const char *name;
    void **slot;
};

/* Opens the shared library `library` (dlopen, symbols bound now and kept
   local) and stores the address of each of the `count` symbols in its slot.
   Returns 1; or 0 with one line saying why (the library or a symbol missing)
   in `failure`, every slot then NULL. The C targets that open Debian's
   libraries at first use (libvips, libcurl, OpenBLAS, libarchive) call it
   once, under pthread_once. */
int modelc_library_open(const char *library, const struct modelc_library_symbol *symbols, size_t count,
                        char *failure, size_t failure_size);

/* Opens one of modelc's own libraries (libModelcFaces.so, libModelcGRPC.so) as
   modelc_library_open does, looked for at $`variable` when that is set, else
   next to the running executable (SwiftPM builds both into one directory),
   else by `name` on the loader's path (an installed modelc's run path). */
int modelc_own_library_open(const char *name, const char *variable, const struct modelc_library_symbol *symbols,
                            size_t count, char *failure, size_t failure_size);

/* glibc's malloc tuning (malloc.h is not in the Glibc module): at most
   `count` arenas (mallopt M_ARENA_MAX), and giving free pages back to the
   system (malloc_trim). Both return glibc's result (1 on success). */
int modelc_malloc_arena_max(int count);
int modelc_malloc_trim(void);

/* SIGTERM and SIGINT caught by a handler that posts a semaphore, installed
   synchronously: a signal that comes before anyone waits is kept, never lost
   (a Dispatch signal source registers later, and SIG_IGN drops what comes
   before). Safe to call again. Returns 0, or -1 with errno. */
int modelc_catch_termination(void);
/* Waits until a caught SIGTERM or SIGINT (one that already came returns at once). */
void modelc_wait_termination(void);

/* libFuzzer's driver, for a program that has its own main (the fuzz build of
   ModelFuzzer); present only when linked with -sanitize=fuzzer. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
