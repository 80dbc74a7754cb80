#ifndef MODELC_CPROTOBUFC_SHIM_H
#define MODELC_CPROTOBUFC_SHIM_H
#include <protobuf-c/protobuf-c.h>
#endif
