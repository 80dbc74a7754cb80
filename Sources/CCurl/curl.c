#include "CCurl.h"

#include "CSystemShims.h"
#include <pthread.h>
#include <stdio.h>

enum { GLOBAL_DEFAULT = 3 };  /* CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32 */
/* What CURLUcode values other than CURLUE_OK come back as when libcurl is missing. */
enum { URL_FAILED = 1 };      /* CURLUE_BAD_HANDLE */

/* libcurl's entry points, looked up once by load(). */
static struct {
    CURLcode (*global_init)(long);
    const char *(*easy_strerror)(CURLcode);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLU *(*url)(void);
    void (*url_cleanup)(CURLU *);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
    CURLUcode (*url_get)(CURLU *, CURLUPart, char **, unsigned int);
    void (*free)(void *);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

/* Fills api from the library, or records why not. */
static void load(void) {
    static const struct modelc_library_symbol symbols[] = {
        {"curl_global_init", (void **)&api.global_init},
        {"curl_easy_strerror", (void **)&api.easy_strerror},
        {"curl_easy_init", (void **)&api.easy_init},
        {"curl_easy_cleanup", (void **)&api.easy_cleanup},
        {"curl_easy_perform", (void **)&api.easy_perform},
        {"curl_easy_setopt", (void **)&api.easy_setopt},
        {"curl_easy_getinfo", (void **)&api.easy_getinfo},
        {"curl_slist_append", (void **)&api.slist_append},
        {"curl_slist_free_all", (void **)&api.slist_free_all},
        {"curl_url", (void **)&api.url},
        {"curl_url_cleanup", (void **)&api.url_cleanup},
        {"curl_url_set", (void **)&api.url_set},
        {"curl_url_get", (void **)&api.url_get},
        {"curl_free", (void **)&api.free},
    };
    loaded = modelc_library_open("libcurl.so.4", symbols, sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

/* pthread_once also orders the reads of api after load() wrote it. */
static int available(void) {
    pthread_once(&once, load);
    return loaded;
}

CURLcode modelc_curl_global_init_default(void) {
    if (!available()) return CURLE_FAILED_INIT;
    return api.global_init(GLOBAL_DEFAULT);
}
const char *modelc_curl_easy_strerror(CURLcode code) {
    if (!available()) return failure;
    return api.easy_strerror(code);
}
CURL *modelc_curl_easy_init(void) { return available() ? api.easy_init() : NULL; }
void modelc_curl_easy_cleanup(CURL *handle) { if (available()) api.easy_cleanup(handle); }
CURLcode modelc_curl_easy_perform(CURL *handle) { return available() ? api.easy_perform(handle) : CURLE_FAILED_INIT; }

CURLcode modelc_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return available() ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}
CURLcode modelc_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return available() ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}
CURLcode modelc_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return available() ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}
CURLcode modelc_curl_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback value) {
    return available() ? api.easy_setopt(handle, option, value) : CURLE_FAILED_INIT;
}
CURLcode modelc_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return available() ? api.easy_getinfo(handle, info, value) : CURLE_FAILED_INIT;
}
CURLcode modelc_curl_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return available() ? api.easy_getinfo(handle, info, value) : CURLE_FAILED_INIT;
}

struct curl_slist *modelc_curl_slist_append(struct curl_slist *list, const char *line) {
    return available() ? api.slist_append(list, line) : NULL;
}
void modelc_curl_slist_free_all(struct curl_slist *list) { if (available()) api.slist_free_all(list); }

CURLU *modelc_curl_url(void) { return available() ? api.url() : NULL; }
void modelc_curl_url_cleanup(CURLU *url) { if (available()) api.url_cleanup(url); }
CURLUcode modelc_curl_url_set(CURLU *url, CURLUPart part, const char *content, unsigned int flags) {
    return available() ? api.url_set(url, part, content, flags) : (CURLUcode)URL_FAILED;
}
CURLUcode modelc_curl_url_get(CURLU *url, CURLUPart part, char **content, unsigned int flags) {
    return available() ? api.url_get(url, part, content, flags) : (CURLUcode)URL_FAILED;
}
void modelc_curl_free(void *memory) { if (available()) api.free(memory); }
