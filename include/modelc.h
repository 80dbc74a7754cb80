/*
 * modelc.h — the C interface of modelc: libmodelc.so once installed (pkg-config modelc),
 * libModelcC.so in a build tree.
 *
 * Conventions:
 * - Every function that can fail returns a status: 0 on success, otherwise
 *   the class of failure numbered as modelc's CLI exit codes (docs/cli.md, "Exit
 *   codes"): 64 a bad argument (NULL, unknown data type), 65-79 the model
 *   file or bundle, 81-88 fetching, 93 an input at fault, 94 a model kind or
 *   layer modelc does not run, 97 an image that cannot be decoded, 1 a bug.
 *   modelc_last_error() gives the calling thread's one-line message.
 * - Handles are opaque; each is freed by its own function. Nothing the
 *   interface returns must be freed by anything but these functions.
 * - Values are copied in; values read out of a features set are owned by
 *   the set and valid until it is freed.
 * - Models are thread-safe: any number of threads may predict with one model.
 *   A features set is used by one thread at a time.
 */
#ifndef MODELC_H
#define MODELC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MODELC_ABI_VERSION 1

typedef struct modelc_model modelc_model;
typedef struct modelc_features modelc_features;
typedef struct modelc_state modelc_state;
typedef struct modelc_generation modelc_generation;

/* Statuses (the CLI's exit codes); the others are listed in docs/cli.md. */
#define MODELC_OK 0
#define MODELC_INTERNAL 1
#define MODELC_USAGE 64
#define MODELC_CANNOT_READ 66
#define MODELC_INVALID_MODEL 76
#define MODELC_BAD_INPUT 93
#define MODELC_UNSUPPORTED_MODEL 94
#define MODELC_BAD_IMAGE 97
#define MODELC_NOT_A_DECODER 107
#define MODELC_TOKEN_OUTSIDE_VOCABULARY 108
#define MODELC_CONTEXT_EXCEEDED 109

/* Element types of arrays. INT64 only appears in outputs (columns of int64 labels). */
#define MODELC_FLOAT32 1
#define MODELC_FLOAT16 2
#define MODELC_FLOAT64 3
#define MODELC_INT32 4
#define MODELC_INT64 5

/* Pixel layouts of 8-bit images. */
#define MODELC_PIXELS_RGB 1
#define MODELC_PIXELS_RGBA 2
#define MODELC_PIXELS_BGRA 3
#define MODELC_PIXELS_ARGB 4
#define MODELC_PIXELS_GRAY 5

/* Kinds of values in a features set. */
#define MODELC_KIND_DOUBLE 1
#define MODELC_KIND_INT64 2
#define MODELC_KIND_STRING 3
#define MODELC_KIND_ARRAY 4
#define MODELC_KIND_IMAGE 5
#define MODELC_KIND_STRING_DICTIONARY 6
#define MODELC_KIND_INT64_DICTIONARY 7
#define MODELC_KIND_STRING_SEQUENCE 8
#define MODELC_KIND_INT64_SEQUENCE 9
#define MODELC_KIND_STRINGS 10 /* a column of strings, one per row */

int32_t modelc_abi_version(void);
/* The calling thread's last error ("" after a success) and status. */
const char *modelc_last_error(void);
int32_t modelc_last_status(void);
void modelc_string_free(char *text);

/* Models. A source (.mlmodel/.mlpackage) is compiled into the cache
 * ($MODELC_CACHE/compiled) first; threads <= 0 uses every core. */
int32_t modelc_open(const char *path, int32_t threads, modelc_model **model);
void modelc_close(modelc_model *model);
/* The description as JSON (modelc inspect --json); free with modelc_string_free. */
int32_t modelc_describe(const modelc_model *model, char **json);
/* A bundle compiled at output_path, or into the cache when it is NULL. */
int32_t modelc_compile(const char *source, const char *output_path, char **bundle_path);
/* A file fetched into the cache as `modelc fetch` does; sha256 may be NULL. */
int32_t modelc_fetch(const char *url, const char *sha256, int32_t offline, char **path);

/* Inputs. Every add copies; a name given twice keeps the last value. */
modelc_features *modelc_features_new(void);
void modelc_features_free(modelc_features *features);
int32_t modelc_features_add_array(modelc_features *features, const char *name, int32_t data_type,
                                  const int64_t *shape, int32_t rank, const void *data);
int32_t modelc_features_add_double(modelc_features *features, const char *name, double value);
int32_t modelc_features_add_int64(modelc_features *features, const char *name, int64_t value);
int32_t modelc_features_add_string(modelc_features *features, const char *name, const char *value);
/* bytes_per_row 0: width x bytes per pixel. */
int32_t modelc_features_add_pixels(modelc_features *features, const char *name, int32_t layout,
                                   int64_t width, int64_t height, int64_t bytes_per_row, const void *data);
/* An encoded image file (JPEG, PNG, ...): decoded, turned upright and
 * center-cropped to the model's declared size at prediction. */
int32_t modelc_features_add_encoded_image(modelc_features *features, const char *name, const void *data, size_t size);
int32_t modelc_features_add_string_dictionary(modelc_features *features, const char *name, size_t count,
                                              const char *const *keys, const double *values);
int32_t modelc_features_add_int64_dictionary(modelc_features *features, const char *name, size_t count,
                                             const int64_t *keys, const double *values);
int32_t modelc_features_add_string_sequence(modelc_features *features, const char *name, size_t count,
                                            const char *const *values);
int32_t modelc_features_add_int64_sequence(modelc_features *features, const char *name, size_t count,
                                           const int64_t *values);

/* Predictions. Outputs are new sets, freed with modelc_features_free. */
int32_t modelc_predict(const modelc_model *model, const modelc_features *inputs, modelc_state *state,
                       modelc_features **outputs);
/* Rows in order, on every thread: outputs[i] holds row i's outputs or its
 * error (modelc_features_status/_error). Returns the first failure's status. */
int32_t modelc_predict_many(const modelc_model *model, const modelc_features *const *inputs, size_t count,
                            modelc_features **outputs);
/* A batch as columns: every input an array whose first axis is the row.
 * Outputs are columns: arrays with a first row axis (a classifier's
 * probabilities rows x classes in label order; int64 labels as INT64),
 * string labels as MODELC_KIND_STRINGS. */
int32_t modelc_predict_columns(const modelc_model *model, const modelc_features *columns, modelc_features **outputs);

/* States of stateful programs (Core ML's MLState): the program's state
 * tensors, zero when made, read and updated by each modelc_predict given
 * the state. One prediction at a time uses a state: callers on several
 * threads take turns. A state serves only the model that made it (93). */
int32_t modelc_make_state(const modelc_model *model, modelc_state **state);
void modelc_state_free(modelc_state *state);

/* Token generation with a decoder (modelc generate): Apple's stateful form (inputIds, causalMask,
 * key/value caches as states, logits) or a decoder without states. start checks the prompt
 * (107 not a decoder, 108 a token outside the vocabulary, 109 more tokens than the context);
 * each next runs one prediction and gives one token, *done 1 once max_new_tokens were given.
 * temperature 0 is greedy; above 0 samples from the top_k likeliest (0: all), seeded by seed.
 * One thread at a time uses a generation. */
int32_t modelc_generate_start(const modelc_model *model, const int64_t *prompt, size_t count, int32_t max_new_tokens,
                              double temperature, int32_t top_k, uint64_t seed, modelc_generation **generation);
int32_t modelc_generate_next(modelc_generation *generation, int64_t *token, double *milliseconds, int32_t *done);
void modelc_generation_free(modelc_generation *generation);

/* Reading outputs. Pointers are owned by the set. */
size_t modelc_features_count(const modelc_features *features);
int32_t modelc_features_status(const modelc_features *features);
const char *modelc_features_error(const modelc_features *features);
const char *modelc_features_name(const modelc_features *features, size_t index);
int32_t modelc_features_kind(const modelc_features *features, size_t index);
int32_t modelc_features_get_number(const modelc_features *features, size_t index, double *as_double, int64_t *as_int64);
const char *modelc_features_get_string(const modelc_features *features, size_t index);
int32_t modelc_features_get_array(const modelc_features *features, size_t index, int32_t *data_type, int32_t *rank,
                                  const int64_t **shape, const void **data);
int32_t modelc_features_get_image(const modelc_features *features, size_t index, int32_t *layout, int64_t *width,
                                  int64_t *height, int64_t *bytes_per_row, const uint8_t **data);
/* Dictionaries: keys (string or int64) and values; sequences and string
 * columns: elements in string_keys or int64_keys. Pointers that do not apply are NULL. */
int32_t modelc_features_get_entries(const modelc_features *features, size_t index, size_t *count,
                                    const char *const **string_keys, const int64_t **int64_keys, const double **values);

#ifdef __cplusplus
}
#endif
#endif
