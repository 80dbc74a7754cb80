#ifndef MODELC_CMICROHTTPD_H
#define MODELC_CMICROHTTPD_H
/* An HTTP/1.1 server on libmicrohttpd (Debian's libmicrohttpd12, 0.9.75,
   built with GnuTLS), opened with dlopen when the first server starts rather
   than linked: commands other than `modelc serve` never load it or GnuTLS.

   One thread per connection. A request's body is gathered (up to a limit)
   before the handler runs; the handler runs on the connection's thread and
   answers before it returns (modelc_http_respond_*), with a body whole or one
   streamed from a source read afterwards on that same thread. Nothing here throws or
   exits: failures come back as NULL or 0 with one line saying why. */
#include <stddef.h>
#include <stdint.h>

/* One request and its answer, valid during the handler call only. */
typedef struct modelc_http_exchange modelc_http_exchange;
/* A running server. */
typedef struct modelc_http_server modelc_http_server;

/* Called once per request whose body arrived whole (and within the limit),
   on the connection's thread; must answer with modelc_http_respond_*. */
typedef void (*modelc_http_handler)(void *context, modelc_http_exchange *exchange);
/* Called with one line about a connection-level problem (libmicrohttpd's own messages). */
typedef void (*modelc_http_logger)(void *context, const char *line);

struct modelc_http_configuration {
    /* A numeric IPv4 or IPv6 address to listen on. */
    const char *host;
    /* 0 picks a free port (modelc_http_port tells which). */
    uint16_t port;
    /* PEM texts (not paths); both NULL for plain HTTP. */
    const char *tls_certificate;
    const char *tls_key;
    /* Bodies longer than this are refused with 413 before they are read
       (a Content-Length over it) or the connection is closed (chunked). */
    uint64_t max_body_bytes;
    /* Connections at once; further ones are refused by the library. */
    unsigned int max_connections;
    /* Seconds a connection may stay idle (or stall mid-body) before it is closed. */
    unsigned int idle_timeout_seconds;
    modelc_http_handler handler;
    modelc_http_logger logger;
    void *context;
};

/* Loads libmicrohttpd if needed, then listens and serves. NULL with the
   reason in `failure` when the library is missing, lacks TLS, or the address
   cannot be bound (`*bind_failed` is then 1; 0 for TLS or library faults). */
modelc_http_server *modelc_http_start(const struct modelc_http_configuration *configuration,
                                      char *failure, size_t failure_size, int *bind_failed);
/* The port the server listens on. */
uint16_t modelc_http_port(modelc_http_server *server);
/* Starts the drain: closes the listening socket (new connections are refused) and every open
   connection with no request under way (idle keep-alive ones, and those that have not sent a
   whole request line yet); a connection whose request line has arrived is served until that
   request is answered, then closed. Call once. */
void modelc_http_quiesce(modelc_http_server *server);
/* Requests under way: from their request line to their answer sent (or their connection gone). */
int modelc_http_requests_in_progress(modelc_http_server *server);
/* After modelc_http_quiesce: closes the connections of requests whose body has not arrived
   whole (nothing is answered on them); requests already handed to the handler are unaffected.
   Returns how many were closed. */
int modelc_http_close_unfinished(modelc_http_server *server);
/* Closes every connection and frees the server; its handlers must have returned. */
void modelc_http_stop(modelc_http_server *server);

const char *modelc_http_method(const modelc_http_exchange *exchange);
/* The path, without the query string, as the client sent it (undecoded). */
const char *modelc_http_url(const modelc_http_exchange *exchange);
/* A request header (case-insensitive name), or NULL. */
const char *modelc_http_header(const modelc_http_exchange *exchange, const char *name);
const uint8_t *modelc_http_body(const modelc_http_exchange *exchange);
size_t modelc_http_body_size(const modelc_http_exchange *exchange);
/* Whether the client closed or reset its connection (a half-close after the request counts), looked
   at without waiting; call it on the connection's thread, during the handler call. */
int modelc_http_client_gone(const modelc_http_exchange *exchange);

/* Starts the answer with a copy of `size` bytes of `body`; 0 on failure. */
int modelc_http_respond_begin(modelc_http_exchange *exchange, const void *body, size_t size);
/* A streamed body's source: writes up to `size` bytes of the next piece into `buffer` and returns
   how many (> 0); 0 when none came within a short wait (it is called again unless the client has
   gone meanwhile); -1 at the end of the body; -2 to close the connection at once. Called on the
   connection's thread, one call at a time. */
typedef long (*modelc_http_stream_read)(void *context, uint8_t *buffer, size_t size);
/* Called once when the streamed answer is over: sent whole, failed, or the client gone. */
typedef void (*modelc_http_stream_release)(void *context);

/* Starts an answer whose body comes from `read` as it is produced (chunked transfer encoding);
   `release(context)` is called once in every case, at once when this fails (0). */
int modelc_http_respond_stream_begin(modelc_http_exchange *exchange, modelc_http_stream_read read,
                                     modelc_http_stream_release release, void *context);
/* Adds a header to the answer begun. */
int modelc_http_respond_header(modelc_http_exchange *exchange, const char *name, const char *value);
/* Sends the answer begun with `status`; 0 when the connection is gone. */
int modelc_http_respond_end(modelc_http_exchange *exchange, unsigned int status);
#endif
