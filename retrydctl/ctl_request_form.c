/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request's -F and --form-string, parsed as curl parses them
 * (its tool_formparse.c): "name=value", "name=@file" (an upload, its
 * filename the file's base name), "name=<file" (the file's content as the
 * value), each with ";type=" and, but for "<file", ";filename=", a word in
 * double quotes where it holds a ';' (\" and \\ escaped). The parts become
 * a MIME body (retryd_body_new_mime), which libcurl encodes as curl -F
 * does. What curl's -F can do beyond that (several files in one part,
 * nested multiparts, ";headers=", ";encoder=", standard input) is refused
 * in one line rather than sent some other way.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_request.h"

static int refuse(const char *arg, const char *what)
{
    fprintf(stderr, "retrydctl request: -F '%s': %s\n", arg, what);
    return CTL_EXIT_USAGE;
}

static char *skip_blanks(char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

/* The closing quote of the double-quoted word at @p s (\" and \\ are
 * escapes), or NULL when there is none (then, as curl, the word is not a
 * quoted one). */
static char *closing_quote(char *s)
{
    for (char *r = s + 1; *r; r++) {
        if (*r == '\\' && (r[1] == '\\' || r[1] == '"'))
            r++;
        else if (*r == '"')
            return r;
    }
    return NULL;
}

/* The quoted word between @p s (its opening quote) and @p close,
 * unescaped into place at @p s; its end. */
static char *unquote(char *s, const char *close)
{
    char *w = s;
    for (const char *r = s + 1; r < close; r++) {
        if (*r == '\\' && (r[1] == '\\' || r[1] == '"'))
            r++;
        *w++ = *r;
    }
    return w;
}

/*
 * One word at *@p p, as curl's get_param_word: quoted, or up to the next
 * ';' with its trailing blanks dropped; NUL-terminated in place into
 * *@p word, *p past the separator. The separator (';' or '\0').
 */
static char form_word(char **p, char **word)
{
    char *s = *p, *end, *q;
    char *close = *s == '"' ? closing_quote(s) : NULL;
    if (close != NULL) {
        end = unquote(s, close);
        /* curl ignores what trails the quote up to the separator. */
        for (q = close + 1; *q && *q != ';'; q++)
            ;
    } else {
        for (q = s; *q && *q != ';'; q++)
            ;
        for (end = q; end > s && isspace((unsigned char)end[-1]); end--)
            ;
    }
    char sep = *q;
    *end = '\0';
    *word = s;
    *p = sep ? q + 1 : q;
    return sep;
}

/* ";type=major/minor": up to the separator, its trailing blanks dropped,
 * checked as curl checks it (a '/' with text on both sides). */
static char form_type(char **p, char **type)
{
    char *s = skip_blanks(*p), *q, *end;
    for (q = s; *q && *q != ';'; q++)
        ;
    for (end = q; end > s && isspace((unsigned char)end[-1]); end--)
        ;
    char sep = *q;
    *end = '\0';
    char *slash = strchr(s, '/');
    *type = slash && slash > s && slash[1] && !strchr(s, ' ') ? s : NULL;
    *p = sep ? q + 1 : q;
    return sep;
}

/* The ";name=value" parameters after a part's content, from *@p p:
 * type= and (@p filename not NULL) filename=; another is skipped with
 * curl's warning, but headers= and encoder=, which would change what is
 * sent, are refused. */
static int form_params(const char *arg, char *p, char sep, retryd_mime_part *m,
                       bool filename)
{
    while (sep == ';') {
        p = skip_blanks(p);
        char *word;
        if (strncmp(p, "type=", 5) == 0) {
            p += 5;
            sep = form_type(&p, &word);
            if (word == NULL)
                return refuse(arg, "illegally formatted content-type field");
            m->content_type = word;
        } else if (filename && strncmp(p, "filename=", 9) == 0) {
            p = skip_blanks(p + 9);
            sep = form_word(&p, &word);
            m->filename = word;
        } else if (strncmp(p, "headers=", 8) == 0 ||
                   strncmp(p, "encoder=", 8) == 0) {
            return refuse(arg, "headers= and encoder= are not supported");
        } else {
            sep = form_word(&p, &word);
            if (*word)
                fprintf(stderr,
                        "retrydctl request: skip unknown form field: %s\n",
                        word);
        }
    }
    return 0;
}

/* The content after "name=": a file to upload ('@'), a file's content
 * ('<'), or the value; with its parameters. */
static int form_content(const char *arg, char *p, retryd_mime_part *m)
{
    char *word, kind = *p;
    if (kind == '(' || (kind == ')' && p[1] == '\0'))
        return refuse(arg, "nested multiparts are not supported");
    /* curl skips the blanks before a value or a file name. */
    p = skip_blanks(kind == '@' || kind == '<' ? p + 1 : p);
    char sep = form_word(&p, &word);
    if (kind == '@' || kind == '<') {
        if (strcmp(word, "-") == 0)
            return refuse(arg, "standard input is not supported; name a file");
        if (kind == '@' && strchr(word, ',') != NULL)
            return refuse(arg, "several files in one part are not supported");
        m->file = word;
        m->no_filename = kind == '<';
    } else {
        m->data = word;
        m->data_len = strlen(word);
    }
    return form_params(arg, p, sep, m, kind != '<');
}

int req_add_form(req_args *a, const char *arg, bool literal)
{
    if (a->n_form == REQ_MAX_FORM)
        return refuse(arg, "too many parts");
    char *text = strdup(arg);
    if (text == NULL)
        return CTL_EXIT_ERROR;
    a->form_text[a->n_form] = text;
    retryd_mime_part *m = &a->form[a->n_form++];
    *m = (retryd_mime_part){.sz = sizeof(*m)};
    char *eq = strchr(text, '=');
    if (eq == NULL)
        return refuse(arg, "illegally formatted input field (no '=')");
    *eq = '\0';
    m->name = eq > text ? text : NULL;
    if (!literal)
        return form_content(arg, eq + 1, m);
    m->data = eq + 1;
    m->data_len = strlen(eq + 1);
    return 0;
}
