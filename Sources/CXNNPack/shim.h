// XNNPACK (Debian libxnnpack-dev) and the thread pool it runs on
// (libpthreadpool-dev): the network runtime's convolutions, fully connected
// layers and pooling.
#include <xnnpack.h>
#include <pthreadpool.h>
