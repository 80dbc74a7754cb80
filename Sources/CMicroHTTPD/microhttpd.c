#include "CMicroHTTPD.h"

#include "CSystemShims.h"
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The header is used for types and constants only; the functions come from dlopen. */
static struct {
    struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                       MHD_AccessHandlerCallback, void *, ...);
    void (*stop_daemon)(struct MHD_Daemon *);
    MHD_socket (*quiesce_daemon)(struct MHD_Daemon *);
    const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType, ...);
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);
    const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
    struct MHD_Response *(*create_response_from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
    struct MHD_Response *(*create_response_from_callback)(uint64_t, size_t, MHD_ContentReaderCallback, void *,
                                                          MHD_ContentReaderFreeCallback);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy_response)(struct MHD_Response *);
    enum MHD_Result (*is_feature_supported)(enum MHD_FEATURE);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_failure[512];
static int loaded;

static void load(void) {
    static const struct modelc_library_symbol symbols[] = {
        {"MHD_start_daemon", (void **)&api.start_daemon},
        {"MHD_stop_daemon", (void **)&api.stop_daemon},
        {"MHD_quiesce_daemon", (void **)&api.quiesce_daemon},
        {"MHD_get_daemon_info", (void **)&api.get_daemon_info},
        {"MHD_get_connection_info", (void **)&api.get_connection_info},
        {"MHD_lookup_connection_value", (void **)&api.lookup_connection_value},
        {"MHD_create_response_from_buffer", (void **)&api.create_response_from_buffer},
        {"MHD_create_response_from_callback", (void **)&api.create_response_from_callback},
        {"MHD_add_response_header", (void **)&api.add_response_header},
        {"MHD_queue_response", (void **)&api.queue_response},
        {"MHD_destroy_response", (void **)&api.destroy_response},
        {"MHD_is_feature_supported", (void **)&api.is_feature_supported},
    };
    loaded = modelc_library_open("libmicrohttpd.so.12", symbols, sizeof symbols / sizeof symbols[0],
                                 load_failure, sizeof load_failure);
}

/* One open connection, as the drain sees it (all fields under the server's lock). */
struct modelc_http_link {
    struct modelc_http_link *previous, *next;
    MHD_socket socket;
    /* A request line has arrived; its answer is not sent yet. */
    int requesting;
    /* That request's body arrived whole: the handler runs or its answer is being sent. */
    int answering;
    /* Shut down by the drain: nothing more is read from it. */
    int closed;
};

struct modelc_http_server {
    struct MHD_Daemon *daemon;
    struct modelc_http_configuration configuration;
    /* libmicrohttpd's last message while starting, to say why a start failed. */
    char last_message[512];
    int started;
    pthread_mutex_t lock;
    /* Under `lock`: the open connections, whether the drain began, requests under way. */
    struct modelc_http_link *links;
    int draining;
    int requests_in_progress;
};

struct modelc_http_exchange {
    struct MHD_Connection *connection;
    struct modelc_http_link *link;
    /* Its connection was closed by the drain before the request line arrived. */
    int abandoned;
    const char *method;
    char *url;
    uint8_t *body;
    size_t size;
    size_t capacity;
    int refused;
    struct MHD_Response *response;
};

static void log_message(void *cls, const char *format, va_list arguments) {
    struct modelc_http_server *server = cls;
    char line[512];
    vsnprintf(line, sizeof line, format, arguments);
    size_t length = strlen(line);
    while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r')) line[--length] = 0;
    if (!server->started) {
        snprintf(server->last_message, sizeof server->last_message, "%s", line);
    } else if (server->configuration.logger) {
        server->configuration.logger(server->configuration.context, line);
    }
}

/* Answers with a short JSON error on the spot (before the body is read). */
static enum MHD_Result refuse(struct MHD_Connection *connection, unsigned int status, const char *message) {
    char body[256];
    int length = snprintf(body, sizeof body, "{\"error\":\"%s\"}", message);
    struct MHD_Response *response = api.create_response_from_buffer((size_t)length, body, MHD_RESPMEM_MUST_COPY);
    if (!response) return MHD_NO;
    api.add_response_header(response, "Content-Type", "application/json");
    api.add_response_header(response, "Connection", "close");
    enum MHD_Result result = api.queue_response(connection, status, response);
    api.destroy_response(response);
    return result;
}

/* Ends a connection at once (under the lock): the peer gets a FIN, the connection's thread reads
   the end and closes it, its descriptor stays valid until MHD_CONNECTION_NOTIFY_CLOSED. */
static void close_link(struct modelc_http_link *link) {
    link->closed = 1;
    shutdown(link->socket, SHUT_RDWR);
}

static void connection_changed(void *cls, struct MHD_Connection *connection, void **socket_context,
                               enum MHD_ConnectionNotificationCode code) {
    struct modelc_http_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info = api.get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct modelc_http_link *link = info ? calloc(1, sizeof *link) : NULL;
        if (!link) return; /* not tracked: closed by modelc_http_stop only */
        link->socket = info->connect_fd;
        pthread_mutex_lock(&server->lock);
        link->next = server->links;
        if (server->links) server->links->previous = link;
        server->links = link;
        /* Accepted just before the listening socket closed: it has sent no request yet. */
        if (server->draining) close_link(link);
        pthread_mutex_unlock(&server->lock);
        *socket_context = link;
        return;
    }
    struct modelc_http_link *link = *socket_context;
    if (!link) return;
    pthread_mutex_lock(&server->lock);
    if (link->requesting) server->requests_in_progress--;
    if (link->previous) link->previous->next = link->next; else server->links = link->next;
    if (link->next) link->next->previous = link->previous;
    pthread_mutex_unlock(&server->lock);
    free(link);
    *socket_context = NULL;
}

/* A request line arrived: from here the request counts as under way for the drain. */
static void *request_started(void *cls, const char *uri, struct MHD_Connection *connection) {
    (void)uri;
    struct modelc_http_server *server = cls;
    struct modelc_http_exchange *exchange = calloc(1, sizeof *exchange);
    if (!exchange) return NULL;
    const union MHD_ConnectionInfo *info = api.get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct modelc_http_link *link = info ? info->socket_context : NULL;
    if (link) {
        pthread_mutex_lock(&server->lock);
        if (link->closed) {
            exchange->abandoned = 1;
        } else {
            link->requesting = 1;
            server->requests_in_progress++;
            exchange->link = link;
        }
        pthread_mutex_unlock(&server->lock);
    }
    return exchange;
}

/* Whether the drain closed the request's connection; otherwise, with `answering`, the request's
   body is whole and the connection stays open until its answer is sent. */
static int closed_by_drain(struct modelc_http_server *server, struct modelc_http_exchange *exchange, int answering) {
    if (!exchange->link) return exchange->abandoned;
    pthread_mutex_lock(&server->lock);
    int closed = exchange->link->closed;
    if (!closed && answering) exchange->link->answering = 1;
    pthread_mutex_unlock(&server->lock);
    return closed;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                                      const char *version, const char *upload_data, size_t *upload_data_size,
                                      void **con_cls) {
    (void)version;
    struct modelc_http_server *server = cls;
    struct modelc_http_exchange *exchange = *con_cls;
    if (!exchange) return MHD_NO; /* out of memory in request_started */
    if (!exchange->connection) {
        if (closed_by_drain(server, exchange, 0)) return MHD_NO;
        exchange->connection = connection;
        exchange->method = method;
        exchange->url = strdup(url);
        if (!exchange->url) return MHD_NO;
        const char *length = api.lookup_connection_value(connection, MHD_HEADER_KIND, "Content-Length");
        if (length) {
            char *end = NULL;
            unsigned long long declared = strtoull(length, &end, 10);
            if (end == length || *end != 0) {
                exchange->refused = 1;
                return refuse(connection, 400, "Content-Length is not a number");
            }
            if (declared > server->configuration.max_body_bytes) {
                exchange->refused = 1;
                char message[128];
                snprintf(message, sizeof message, "request body of %llu bytes is over the limit of %llu bytes",
                         declared, (unsigned long long)server->configuration.max_body_bytes);
                return refuse(connection, 413, message);
            }
        }
        return MHD_YES;
    }
    if (exchange->refused) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (closed_by_drain(server, exchange, 0)) return MHD_NO;
        size_t needed = exchange->size + *upload_data_size;
        if (needed > server->configuration.max_body_bytes) return MHD_NO; /* chunked past the limit: close */
        if (needed > exchange->capacity) {
            size_t capacity = exchange->capacity ? exchange->capacity : 16384;
            while (capacity < needed) capacity *= 2;
            uint8_t *grown = realloc(exchange->body, capacity);
            if (!grown) return MHD_NO;
            exchange->body = grown;
            exchange->capacity = capacity;
        }
        memcpy(exchange->body + exchange->size, upload_data, *upload_data_size);
        exchange->size = needed;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (closed_by_drain(server, exchange, 1)) return MHD_NO;
    server->configuration.handler(server->configuration.context, exchange);
    if (exchange->response) {
        /* The handler did not finish its answer: a bug on the other side; answer 500. */
        api.destroy_response(exchange->response);
        exchange->response = NULL;
        return refuse(connection, 500, "the handler gave no answer");
    }
    return MHD_YES;
}

static void completed(void *cls, struct MHD_Connection *connection, void **con_cls, enum MHD_RequestTerminationCode code) {
    (void)connection;
    (void)code;
    struct modelc_http_server *server = cls;
    struct modelc_http_exchange *exchange = *con_cls;
    if (!exchange) return;
    if (exchange->link) {
        pthread_mutex_lock(&server->lock);
        struct modelc_http_link *link = exchange->link;
        if (link->requesting) server->requests_in_progress--;
        link->requesting = 0;
        link->answering = 0;
        /* Answered while draining: the connection is idle now, and is not kept alive. */
        if (server->draining && !link->closed) close_link(link);
        pthread_mutex_unlock(&server->lock);
    }
    if (exchange->response) api.destroy_response(exchange->response);
    free(exchange->body);
    free(exchange->url);
    free(exchange);
    *con_cls = NULL;
}

modelc_http_server *modelc_http_start(const struct modelc_http_configuration *configuration,
                                      char *failure, size_t failure_size, int *bind_failed) {
    *bind_failed = 0;
    pthread_once(&once, load);
    if (!loaded) {
        snprintf(failure, failure_size, "libmicrohttpd cannot be loaded: %s", load_failure);
        return NULL;
    }
    int tls = configuration->tls_certificate != NULL || configuration->tls_key != NULL;
    if (tls && api.is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(failure, failure_size, "this libmicrohttpd was built without TLS");
        return NULL;
    }
    struct sockaddr_in6 address6;
    struct sockaddr_in address4;
    struct sockaddr *address;
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL
        | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    memset(&address4, 0, sizeof address4);
    memset(&address6, 0, sizeof address6);
    if (inet_pton(AF_INET, configuration->host, &address4.sin_addr) == 1) {
        address4.sin_family = AF_INET;
        address4.sin_port = htons(configuration->port);
        address = (struct sockaddr *)&address4;
    } else if (inet_pton(AF_INET6, configuration->host, &address6.sin6_addr) == 1) {
        address6.sin6_family = AF_INET6;
        address6.sin6_port = htons(configuration->port);
        address = (struct sockaddr *)&address6;
        flags |= MHD_USE_IPv6;
    } else {
        *bind_failed = 1;
        snprintf(failure, failure_size, "%s is not a numeric IPv4 or IPv6 address", configuration->host);
        return NULL;
    }
    if (tls) flags |= MHD_USE_TLS;
    struct modelc_http_server *server = calloc(1, sizeof *server);
    if (!server) {
        snprintf(failure, failure_size, "out of memory");
        return NULL;
    }
    server->configuration = *configuration;
    pthread_mutex_init(&server->lock, NULL);
    struct MHD_OptionItem options[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)log_message, server},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, server},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)connection_changed, server},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)request_started, server},
        {MHD_OPTION_SOCK_ADDR, 0, address},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)configuration->max_connections, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)configuration->idle_timeout_seconds, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
        {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)configuration->tls_certificate},
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)configuration->tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    server->daemon = api.start_daemon(flags, configuration->port, NULL, NULL, access_handler, server,
                                      MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (!server->daemon) {
        const char *reason = server->last_message[0] ? server->last_message : "libmicrohttpd could not start";
        *bind_failed = !tls || strstr(reason, "bind") != NULL || strstr(reason, "listen") != NULL
            || strstr(reason, "socket") != NULL;
        snprintf(failure, failure_size, "%s", reason);
        pthread_mutex_destroy(&server->lock);
        free(server);
        return NULL;
    }
    server->started = 1;
    return server;
}

uint16_t modelc_http_port(modelc_http_server *server) {
    const union MHD_DaemonInfo *info = api.get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

void modelc_http_quiesce(modelc_http_server *server) {
    MHD_socket socket = api.quiesce_daemon(server->daemon);
    if (socket != MHD_INVALID_SOCKET) close(socket);
    pthread_mutex_lock(&server->lock);
    server->draining = 1;
    for (struct modelc_http_link *link = server->links; link; link = link->next) {
        if (!link->requesting && !link->closed) close_link(link);
    }
    pthread_mutex_unlock(&server->lock);
}

int modelc_http_requests_in_progress(modelc_http_server *server) {
    pthread_mutex_lock(&server->lock);
    int count = server->requests_in_progress;
    pthread_mutex_unlock(&server->lock);
    return count;
}

int modelc_http_close_unfinished(modelc_http_server *server) {
    int count = 0;
    pthread_mutex_lock(&server->lock);
    for (struct modelc_http_link *link = server->links; link; link = link->next) {
        if (link->requesting && !link->answering && !link->closed) {
            close_link(link);
            count++;
        }
    }
    pthread_mutex_unlock(&server->lock);
    return count;
}

void modelc_http_stop(modelc_http_server *server) {
    api.stop_daemon(server->daemon);
    pthread_mutex_destroy(&server->lock);
    free(server);
}

const char *modelc_http_method(const modelc_http_exchange *exchange) { return exchange->method; }
const char *modelc_http_url(const modelc_http_exchange *exchange) { return exchange->url; }
const char *modelc_http_header(const modelc_http_exchange *exchange, const char *name) {
    return api.lookup_connection_value(exchange->connection, MHD_HEADER_KIND, name);
}
const uint8_t *modelc_http_body(const modelc_http_exchange *exchange) { return exchange->body; }
size_t modelc_http_body_size(const modelc_http_exchange *exchange) { return exchange->size; }

int modelc_http_respond_begin(modelc_http_exchange *exchange, const void *body, size_t size) {
    if (exchange->response) api.destroy_response(exchange->response);
    exchange->response = api.create_response_from_buffer(size, (void *)body, MHD_RESPMEM_MUST_COPY);
    return exchange->response != NULL;
}

/* A streamed answer's source, as libmicrohttpd's content reader sees it. */
struct modelc_http_stream {
    modelc_http_stream_read read;
    modelc_http_stream_release release;
    void *context;
    MHD_socket socket;
};

#ifndef POLLRDHUP
#define POLLRDHUP 0x2000
#endif

/* Whether the peer closed or reset the connection (a FIN is seen even with unread bytes before it). */
static int peer_gone(MHD_socket socket) {
    if (socket == MHD_INVALID_SOCKET) return 0;
    struct pollfd descriptor = {.fd = socket, .events = POLLRDHUP};
    if (poll(&descriptor, 1, 0) <= 0) return 0;
    return (descriptor.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* Runs on the connection's own thread (one thread per connection): waits for the next piece,
   a short wait at a time, looking between waits whether the client is still there. Never returns
   0, which would make libmicrohttpd call again at once (busy waiting in this polling mode). */
static ssize_t stream_reader(void *cls, uint64_t position, char *buffer, size_t size) {
    (void)position;
    struct modelc_http_stream *stream = cls;
    for (;;) {
        long count = stream->read(stream->context, (uint8_t *)buffer, size);
        if (count > 0) return (ssize_t)count;
        if (count == -1) return MHD_CONTENT_READER_END_OF_STREAM;
        if (count < -1) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (peer_gone(stream->socket)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

int modelc_http_client_gone(const modelc_http_exchange *exchange) {
    const union MHD_ConnectionInfo *info = api.get_connection_info(exchange->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? peer_gone(info->connect_fd) : 0;
}

static void stream_free(void *cls) {
    struct modelc_http_stream *stream = cls;
    stream->release(stream->context);
    free(stream);
}

int modelc_http_respond_stream_begin(modelc_http_exchange *exchange, modelc_http_stream_read read,
                                     modelc_http_stream_release release, void *context) {
    if (exchange->response) api.destroy_response(exchange->response);
    exchange->response = NULL;
    struct modelc_http_stream *stream = calloc(1, sizeof *stream);
    if (!stream) {
        release(context);
        return 0;
    }
    stream->read = read;
    stream->release = release;
    stream->context = context;
    const union MHD_ConnectionInfo *info = api.get_connection_info(exchange->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    stream->socket = info ? info->connect_fd : MHD_INVALID_SOCKET;
    exchange->response = api.create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, stream, stream_free);
    if (!exchange->response) {
        stream_free(stream);
        return 0;
    }
    return 1;
}

int modelc_http_respond_header(modelc_http_exchange *exchange, const char *name, const char *value) {
    return exchange->response && api.add_response_header(exchange->response, name, value) == MHD_YES;
}

int modelc_http_respond_end(modelc_http_exchange *exchange, unsigned int status) {
    if (!exchange->response) return 0;
    enum MHD_Result result = api.queue_response(exchange->connection, status, exchange->response);
    api.destroy_response(exchange->response);
    exchange->response = NULL;
    return result == MHD_YES;
}
