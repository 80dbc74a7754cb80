#define _GNU_SOURCE
#include "CSystemShims.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

int modelc_rename_exchange(const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
}

int modelc_connect_unix(const char *path) {
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    size_t length = strlen(path);
    if (length >= sizeof(address.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(address.sun_path, path, length + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (const struct sockaddr *)&address, sizeof(address)) != 0
        || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int modelc_pipe_nonblocking(int fds[2]) {
    return pipe2(fds, O_CLOEXEC | O_NONBLOCK);
}

long modelc_file_system_type(int fd) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    return (long)info.f_type;
}

long modelc_copy_file_range(int in, int out, size_t length) {
    return (long)copy_file_range(in, NULL, out, NULL, length, 0);
}

int modelc_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (off64_t)offset, (off64_t)length, SYNC_FILE_RANGE_WRITE);
}

int modelc_malloc_arena_max(int count) { return mallopt(M_ARENA_MAX, count); }
int modelc_malloc_trim(void) { return malloc_trim(0); }
