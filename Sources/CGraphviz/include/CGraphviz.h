#ifndef MODELC_CGRAPHVIZ_H
#define MODELC_CGRAPHVIZ_H
/* Graphviz (Debian's libgvc6: libgvc.so.6 and libcgraph.so.6), opened with
   dlopen at the first layout rather than linked: commands that draw nothing
   do not load it and the ~40 libraries its plugins need. Nothing here needs
   Graphviz's headers: the few entry points used are declared in graphviz.c
   from the library's stable ABI (soname 6).

   Graphviz is not thread-safe; calls are serialized by a lock inside. */
#include <stddef.h>

/* Reads `dot` (DOT text), lays it out with the `dot` engine and renders it
   as `format` (e.g. "svg"). Returns 1 and the rendered bytes in *output
   (*length bytes, NUL-terminated; free with modelc_graphviz_free); or 0 with
   one line saying why (Graphviz missing, the text rejected, the layout
   failed) in `failure`. */
int modelc_graphviz_render(const char *dot, const char *format, char **output, size_t *length,
                           char *failure, size_t failure_size);

/* Frees what modelc_graphviz_render returned. */
void modelc_graphviz_free(char *output);

#endif
