#ifndef MODELC_CCRYPTO_SHIM_H
#define MODELC_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/sha.h>
#endif
