#ifndef MODELC_CGRPCSERVER_H
#define MODELC_CGRPCSERVER_H
/* A gRPC server (grpc++ from Debian's libgrpc++) that moves calls between the network and
   a handler, behind a plain C interface. Built as its own shared library
   (libModelcGRPC.so), which `modelc serve` opens with dlopen (CGRPC.h): no other command
   loads grpc.

   The server knows no protocol: every unary call of any method is handed to `handler` as
   the method's path and the request message's bytes; the handler answers with a status
   code and, when OK, the response message's bytes. Messages are encoded by the caller. */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct modelc_grpc_server;
/* One call being handled: valid from the handler's call until modelc_grpc_call_finish. */
struct modelc_grpc_call;

struct modelc_grpc_configuration {
    /* A numeric address (IPv4 or IPv6, without brackets) and port; port 0 picks a free one. */
    const char *host;
    int port;
    /* PEM texts; both NULL: plaintext. */
    const char *tls_certificate;
    const char *tls_key;
    /* A request message over this is refused with RESOURCE_EXHAUSTED by grpc itself. */
    size_t max_message_bytes;
    /* Calls handed to the handler and not finished, at most; one more is answered
       RESOURCE_EXHAUSTED at once. */
    unsigned max_calls;
    /* Called on a thread of the server's own (one per call under way, reused), which it may
       block; must call modelc_grpc_call_finish exactly once, on any thread. */
    void (*handler)(void *context, struct modelc_grpc_call *call);
    /* grpc's own errors and warnings, one line each (any thread). */
    void (*logger)(void *context, const char *line);
    void *context;
};

/* Starts listening and serving. NULL on failure with a one-line reason in `failure`, and
   *bind_failed set when the address could not be bound. */
struct modelc_grpc_server *modelc_grpc_start(const struct modelc_grpc_configuration *configuration, char *failure,
                                             size_t failure_size, int *bind_failed);
/* The port listened on. */
int modelc_grpc_port(const struct modelc_grpc_server *server);
/* Calls handed to the handler and not finished yet. */
long modelc_grpc_calls_in_progress(const struct modelc_grpc_server *server);
/* Starts the drain and returns: new calls are refused (UNAVAILABLE); the calls under way
   may be finished for `grace_milliseconds`, then grpc cancels them. Call once at most. */
void modelc_grpc_shutdown(struct modelc_grpc_server *server, long grace_milliseconds);
/* Waits for the drain (started now, without grace, if it was not), stops the server's threads
   and frees it. The handler must have finished every call it was given. */
void modelc_grpc_stop(struct modelc_grpc_server *server);

/* The call's method path, "/package.Service/Method". */
const char *modelc_grpc_call_method(const struct modelc_grpc_call *call);
/* The request message's bytes. */
const unsigned char *modelc_grpc_call_message(const struct modelc_grpc_call *call, size_t *size);
/* The first value of request metadata `key` (lower case), NUL-terminated, or NULL. */
const char *modelc_grpc_call_metadata(const struct modelc_grpc_call *call, const char *key);
/* Nanoseconds from now until the client's deadline (<= 0: passed), or INT64_MAX without one. */
int64_t modelc_grpc_call_deadline_nanoseconds(const struct modelc_grpc_call *call);
/* Whether the client has cancelled the call or gone away (or the deadline passed). */
int modelc_grpc_call_cancelled(const struct modelc_grpc_call *call);
/* Answers and releases the call: `code` is a gRPC status code (0 OK: `response` is the
   message; otherwise `message` says why). The call must not be used afterwards. */
void modelc_grpc_call_finish(struct modelc_grpc_call *call, int code, const char *message,
                             const unsigned char *response, size_t response_size);
/* The grpc version the library was built with ("1.51.1"). */
const char *modelc_grpc_version(void);

#ifdef __cplusplus
}
#endif
#endif
