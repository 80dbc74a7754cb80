#include "CGraphviz.h"

#include "CSystemShims.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct GVC_s GVC_t;
typedef struct Agraph_s Agraph_t;
typedef int (*agusererrf)(char *message);

/* Graphviz's entry points, looked up once by load(). */
static struct {
    GVC_t *(*context)(void);
    int (*layout)(GVC_t *, Agraph_t *, const char *);
    int (*free_layout)(GVC_t *, Agraph_t *);
    int (*render_data)(GVC_t *, Agraph_t *, const char *, char **, unsigned int *);
    void (*free_render_data)(char *);
    Agraph_t *(*memread)(const char *);
    int (*close)(Agraph_t *);
    agusererrf (*set_error_function)(agusererrf);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char load_failure[512];
static int loaded;
static GVC_t *context;
/* What Graphviz reported during one render (under lock): its error function
   is called with pieces ("Error", ": <stdin>: syntax error in line 1 …"),
   joined here into one line. */
static char message[512];

static int record_message(char *text) {
    size_t used = strlen(message);
    for (const char *c = text; *c && used + 1 < sizeof message; c++) {
        char next = (*c == '\n' || *c == '\t') ? ' ' : *c;
        if (next == ' ' && (used == 0 || message[used - 1] == ' ')) continue;
        message[used++] = next;
    }
    message[used] = 0;
    return 0;
}

static void load(void) {
    static const struct modelc_library_symbol cgraph[] = {
        {"agmemread", (void **)&api.memread},
        {"agclose", (void **)&api.close},
        {"agseterrf", (void **)&api.set_error_function},
    };
    static const struct modelc_library_symbol gvc[] = {
        {"gvContext", (void **)&api.context},
        {"gvLayout", (void **)&api.layout},
        {"gvFreeLayout", (void **)&api.free_layout},
        {"gvRenderData", (void **)&api.render_data},
        {"gvFreeRenderData", (void **)&api.free_render_data},
    };
    loaded = modelc_library_open("libcgraph.so.6", cgraph, sizeof cgraph / sizeof cgraph[0], load_failure, sizeof load_failure)
        && modelc_library_open("libgvc.so.6", gvc, sizeof gvc / sizeof gvc[0], load_failure, sizeof load_failure);
    if (!loaded) return;
    api.set_error_function(record_message);
    context = api.context();
    if (!context) {
        loaded = 0;
        snprintf(load_failure, sizeof load_failure, "libgvc.so.6: gvContext failed");
    }
}

int modelc_graphviz_render(const char *dot, const char *format, char **output, size_t *length,
                           char *failure, size_t failure_size) {
    *output = NULL;
    *length = 0;
    pthread_once(&once, load);
    if (!loaded) {
        snprintf(failure, failure_size, "%s", load_failure);
        return 0;
    }
    pthread_mutex_lock(&lock);
    message[0] = 0;
    int ok = 0;
    Agraph_t *graph = api.memread(dot);
    if (!graph) {
        snprintf(failure, failure_size, "the DOT text was rejected: %s", message[0] ? message : "syntax error");
    } else if (api.layout(context, graph, "dot") != 0) {
        snprintf(failure, failure_size, "layout failed: %s", message[0] ? message : "no reason given");
    } else {
        char *data = NULL;
        unsigned int size = 0;
        if (api.render_data(context, graph, format, &data, &size) != 0 || !data) {
            snprintf(failure, failure_size, "rendering %s failed: %s", format, message[0] ? message : "no reason given");
        } else {
            /* Copied so that the caller frees with the C library's free. */
            char *copy = malloc((size_t)size + 1);
            if (copy) {
                memcpy(copy, data, size);
                copy[size] = 0;
                *output = copy;
                *length = size;
                ok = 1;
            } else {
                snprintf(failure, failure_size, "out of memory for %u bytes of %s", size, format);
            }
            api.free_render_data(data);
        }
        api.free_layout(context, graph);
    }
    if (graph) api.close(graph);
    pthread_mutex_unlock(&lock);
    return ok;
}

void modelc_graphviz_free(char *output) { free(output); }
