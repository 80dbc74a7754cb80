#ifndef MODELC_CARCHIVE_SHIM_H
#define MODELC_CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>
#endif
