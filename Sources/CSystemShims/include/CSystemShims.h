#ifndef MODELC_CSYSTEMSHIMS_H
#define MODELC_CSYSTEMSHIMS_H

/* Linux system calls that Swift's Glibc module does not expose. */

/* Atomically swaps the directory entries `from` and `to` (renameat2 with
   RENAME_EXCHANGE). Returns 0, or -1 with errno set. */
int modelc_rename_exchange(const char *from, const char *to);

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's driver, for a program that has its own main (the fuzz build of
   ModelFuzzer); present only when linked with -sanitize=fuzzer. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
