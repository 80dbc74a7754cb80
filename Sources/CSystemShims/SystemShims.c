#define _GNU_SOURCE
#include "CSystemShims.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
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

static sem_t termination;
static pthread_once_t termination_once = PTHREAD_ONCE_INIT;
static int termination_status;

/* sem_post is async-signal-safe. */
static void on_termination(int number) {
    (void)number;
    sem_post(&termination);
}

static void install_termination(void) {
    if (sem_init(&termination, 0, 0) != 0) {
        termination_status = -1;
        return;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_termination;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &action, NULL) != 0 || sigaction(SIGINT, &action, NULL) != 0) termination_status = -1;
}

int modelc_catch_termination(void) {
    pthread_once(&termination_once, install_termination);
    return termination_status;
}

void modelc_wait_termination(void) {
    while (sem_wait(&termination) != 0 && errno == EINTR) {
    }
}
