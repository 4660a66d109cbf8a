package bench

import "strconv"

// vocab is the handful of nouns one source file keeps coming back to, as
// real code repeats its own identifiers: it makes a file compress about as
// well on its own as it does among its neighbours.
type vocab struct {
	vr    *rng
	words []string
}

func newVocab(r *rng) vocab {
	v := vocab{vr: r}
	for range r.between(6, 14) {
		v.words = append(v.words, r.pick(nouns))
	}
	return v
}

// noun returns one of the file's own nouns, or now and then any noun.
func (v *vocab) noun() string {
	if v.vr.percent(75) {
		return v.words[v.vr.intn(len(v.words))]
	}
	return v.vr.pick(nouns)
}

// ident appends a snake_case verb_noun identifier.
func (v *vocab) ident(b []byte) []byte {
	b = append(b, v.vr.pick(verbs)...)
	b = append(b, '_')
	return append(b, v.noun()...)
}

// camel appends a camelCase verbNoun identifier.
func (v *vocab) camel(b []byte) []byte {
	b = append(b, v.vr.pick(verbs)...)
	start := len(b)
	b = append(b, v.noun()...)
	b[start] -= 'a' - 'A'
	return b
}

// phpText is a WordPress-style PHP source file: a file docblock, then
// functions, classes, hook registrations and configuration arrays. Each file
// has its own prefix (plugin slug) so that files do not repeat each other
// more than real ones do.
type phpText struct {
	vocab
	r      *rng
	prefix string
	domain string // text domain for translated strings
}

var phpTypes = []string{"string", "int", "bool", "array", "WP_Post", "WP_Error", "mixed", "object", "float"}

func (t *phpText) head(b []byte) []byte {
	b = append(b, "<?php\n/**\n * "...)
	b = appendSentence(t.r, b, 4, 10)
	b = append(b, "\n *\n * @package "...)
	b = appendTitle(t.r, b, 2)
	b = append(b, "\n * @since "...)
	b = appendVersion(t.r, b)
	b = append(b, "\n */\n\n"...)
	if t.r.percent(40) {
		b = append(b, "namespace "...)
		b = appendTitle(t.r, b, 1)
		b = append(b, '\\')
		b = appendTitle(t.r, b, 1)
		b = append(b, ";\n\n"...)
	}
	return append(b, "if ( ! defined( 'ABSPATH' ) ) {\n\texit; // Exit if accessed directly.\n}\n\n"...)
}

func (t *phpText) tail(b []byte) []byte { return b }

func (t *phpText) unit(b []byte) []byte {
	switch n := t.r.intn(10); {
	case n < 5:
		return t.function(b, 0, "function ")
	case n < 7:
		return t.class(b)
	case n < 9:
		for range t.r.between(1, 4) {
			b = append(b, t.r.pick([]string{"add_action", "add_filter"})...)
			b = append(b, "( '"...)
			b = append(b, t.r.pick([]string{"init", "admin_init", "wp_enqueue_scripts", "rest_api_init", "the_content", "save_post", "admin_menu", "wp_head"})...)
			b = append(b, "', '"...)
			b = append(b, t.prefix...)
			b = append(b, '_')
			b = t.ident(b)
			b = append(b, "', "...)
			b = strconv.AppendInt(b, t.r.between(1, 20)*5, 10)
			b = append(b, " );\n"...)
		}
		return append(b, '\n')
	default:
		b = append(b, '$')
		b = append(b, t.noun()...)
		b = append(b, "_defaults = "...)
		b = t.array(b, 0)
		return append(b, ";\n\n"...)
	}
}

// function appends a documented function (or method, when prefix is a
// visibility keyword) at the given indentation.
func (t *phpText) function(b []byte, ind int, prefix string) []byte {
	r := t.r
	b = appendIndent(b, ind)
	b = append(b, "/**\n"...)
	b = appendIndent(b, ind)
	b = append(b, " * "...)
	b = appendSentence(r, b, 5, 14)
	b = append(b, '\n')
	args := int(r.between(0, 3))
	for i := range args {
		b = appendIndent(b, ind)
		b = append(b, " * @param "...)
		b = append(b, r.pick(phpTypes)...)
		b = append(b, " $"...)
		b = append(b, t.noun()...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ' ')
		b = appendSentence(r, b, 3, 8)
		b = append(b, '\n')
	}
	b = appendIndent(b, ind)
	b = append(b, " * @return "...)
	b = append(b, r.pick(phpTypes)...)
	b = append(b, '\n')
	b = appendIndent(b, ind)
	b = append(b, " */\n"...)
	b = appendIndent(b, ind)
	b = append(b, prefix...)
	if ind == 0 {
		b = append(b, t.prefix...)
		b = append(b, '_')
	}
	b = t.ident(b)
	b = append(b, '(')
	for i := range args {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, " $"...)
		b = append(b, t.noun()...)
		b = strconv.AppendInt(b, int64(i), 10)
	}
	if args > 0 {
		b = append(b, ' ')
	}
	b = append(b, ") {\n"...)
	for range r.between(2, 8) {
		b = t.statement(b, ind+1)
	}
	b = appendIndent(b, ind+1)
	b = append(b, "return $"...)
	b = append(b, t.noun()...)
	b = append(b, ";\n"...)
	b = appendIndent(b, ind)
	return append(b, "}\n\n"...)
}

func (t *phpText) statement(b []byte, ind int) []byte {
	r := t.r
	b = appendIndent(b, ind)
	switch r.intn(9) {
	case 0:
		b = append(b, "if ( empty( $"...)
		b = append(b, t.noun()...)
		b = append(b, " ) ) {\n"...)
		b = appendIndent(b, ind+1)
		b = append(b, "return new WP_Error( '"...)
		b = append(b, t.prefix...)
		b = append(b, "_invalid_"...)
		b = append(b, t.noun()...)
		b = append(b, "', __( '"...)
		b = appendSentence(r, b, 3, 9)
		b = append(b, "', '"...)
		b = append(b, t.domain...)
		b = append(b, "' ) );\n"...)
		b = appendIndent(b, ind)
		return append(b, "}\n"...)
	case 1:
		v := t.noun()
		b = append(b, "foreach ( (array) $"...)
		b = append(b, v...)
		b = append(b, "s as $key => $"...)
		b = append(b, v...)
		b = append(b, " ) {\n"...)
		b = appendIndent(b, ind+1)
		b = append(b, "$output[ $key ] = "...)
		b = t.ident(b)
		b = append(b, "( $"...)
		b = append(b, v...)
		b = append(b, " );\n"...)
		b = appendIndent(b, ind)
		return append(b, "}\n"...)
	case 2:
		b = append(b, "$args = "...)
		b = t.array(b, ind)
		return append(b, ";\n"...)
	case 3:
		b = append(b, "return apply_filters( '"...)
		b = append(b, t.prefix...)
		b = append(b, '_')
		b = append(b, t.noun()...)
		b = append(b, "', $"...)
		b = append(b, t.noun()...)
		return append(b, ", $this );\n"...)
	case 4:
		b = append(b, "$results = $wpdb->get_results( $wpdb->prepare( \"SELECT "...)
		b = append(b, t.noun()...)
		b = append(b, "_id, meta_value FROM {$wpdb->prefix}"...)
		b = append(b, t.prefix...)
		b = append(b, '_')
		b = append(b, t.noun()...)
		b = append(b, "s WHERE "...)
		b = append(b, t.noun()...)
		b = append(b, " = %s LIMIT %d\", $"...)
		b = append(b, t.noun()...)
		b = append(b, ", "...)
		b = strconv.AppendInt(b, r.between(1, 500), 10)
		return append(b, " ) );\n"...)
	case 5:
		b = append(b, "echo '<div class=\""...)
		b = append(b, t.prefix...)
		b = append(b, '-')
		b = append(b, t.noun()...)
		b = append(b, "\">' . esc_html__( '"...)
		b = appendSentence(r, b, 2, 10)
		b = append(b, "', '"...)
		b = append(b, t.domain...)
		return append(b, "' ) . '</div>';\n"...)
	case 6:
		b = append(b, "// "...)
		b = appendSentence(r, b, 4, 16)
		return append(b, '\n')
	case 7:
		b = append(b, "$cache_key = '"...)
		b = append(b, t.prefix...)
		b = append(b, '_')
		b = appendHex(r, b, int(r.between(8, 32)))
		return append(b, "';\n"...)
	default:
		b = append(b, '$')
		b = append(b, t.noun()...)
		b = append(b, " = "...)
		b = t.ident(b)
		b = append(b, "( $"...)
		b = append(b, t.noun()...)
		b = append(b, ", '"...)
		b = append(b, r.pick(prose)...)
		b = append(b, "', "...)
		b = strconv.AppendInt(b, r.between(0, 3600), 10)
		return append(b, " );\n"...)
	}
}

// array appends a PHP array literal whose lines are indented by ind+1.
func (t *phpText) array(b []byte, ind int) []byte {
	b = append(b, "array(\n"...)
	for range t.r.between(2, 7) {
		b = appendIndent(b, ind+1)
		b = append(b, '\'')
		b = append(b, t.noun()...)
		b = append(b, "' => "...)
		switch t.r.intn(4) {
		case 0:
			b = strconv.AppendInt(b, t.r.between(0, 10000), 10)
		case 1:
			b = append(b, t.r.pick([]string{"true", "false", "null"})...)
		default:
			b = append(b, '\'')
			b = appendWords(t.r, b, int(t.r.between(1, 4)))
			b = append(b, '\'')
		}
		b = append(b, ",\n"...)
	}
	b = appendIndent(b, ind)
	return append(b, ')')
}

// class appends a class with properties and a few methods.
func (t *phpText) class(b []byte) []byte {
	r := t.r
	b = append(b, "/**\n * "...)
	b = appendSentence(r, b, 5, 14)
	b = append(b, "\n */\nclass "...)
	b = appendTitle(r, b, 1)
	b = append(b, '_')
	for range r.between(1, 3) {
		b = appendTitle(r, b, 1)
	}
	b = append(b, " {\n\n"...)
	for range r.between(1, 4) {
		b = append(b, "\t/**\n\t * "...)
		b = appendSentence(r, b, 3, 9)
		b = append(b, "\n\t *\n\t * @var "...)
		b = append(b, r.pick(phpTypes)...)
		b = append(b, "\n\t */\n\t"...)
		b = append(b, r.pick([]string{"protected", "private", "public"})...)
		b = append(b, " $"...)
		b = append(b, t.noun()...)
		b = append(b, ";\n\n"...)
	}
	for range r.between(1, 4) {
		b = t.function(b, 1, r.pick([]string{"public function ", "protected function ", "private function ", "public static function "}))
	}
	return append(b, "}\n\n"...)
}

// jsText is a JavaScript file; minified ones drop comments and spacing and
// use short local names, which makes them compress less, as real bundles do.
type jsText struct {
	vocab
	r      *rng
	prefix string
	min    bool
}

func (t *jsText) head(b []byte) []byte {
	if t.min {
		b = append(b, "/*! "...)
		b = append(b, t.prefix...)
		b = append(b, " v"...)
		b = appendVersion(t.r, b)
		return append(b, " | GPL-2.0-or-later */\n!function(e,t){\"use strict\";"...)
	}
	b = append(b, "/**\n * "...)
	b = appendSentence(t.r, b, 4, 12)
	b = append(b, "\n *\n * @since "...)
	b = appendVersion(t.r, b)
	return append(b, "\n */\n( function( $, window, document ) {\n\t'use strict';\n\n"...)
}

func (t *jsText) tail(b []byte) []byte {
	if t.min {
		return append(b, "}(jQuery,window);\n"...)
	}
	return append(b, "} )( jQuery, window, document );\n"...)
}

func (t *jsText) unit(b []byte) []byte {
	r := t.r
	if t.min {
		const short = "abcdefghijklmnopqrstuvwxyz"
		b = append(b, "function "...)
		b = append(b, short[r.intn(26)], short[r.intn(26)])
		b = append(b, "(n,r){var i="...)
		b = append(b, short[r.intn(26)])
		b = append(b, "(n."...)
		b = t.camel(b)
		b = append(b, ");"...)
		for range r.between(1, 5) {
			b = append(b, "if(!i||i."...)
			b = append(b, t.noun()...)
			b = append(b, ")return r("...)
			b = strconv.AppendInt(b, r.between(0, 999), 10)
			b = append(b, ");i."...)
			b = t.camel(b)
			b = append(b, "=\""...)
			b = appendWords(r, b, int(r.between(1, 3)))
			b = append(b, "\";"...)
		}
		return append(b, "return i}"...)
	}
	switch r.intn(3) {
	case 0:
		b = append(b, "\t/**\n\t * "...)
		b = appendSentence(r, b, 4, 12)
		b = append(b, "\n\t */\n\tfunction "...)
		b = t.camel(b)
		b = append(b, "( "...)
		b = append(b, t.noun()...)
		b = append(b, ", options ) {\n"...)
		for range r.between(1, 5) {
			b = append(b, "\t\tvar "...)
			b = append(b, t.noun()...)
			b = append(b, " = options."...)
			b = t.camel(b)
			b = append(b, " || '"...)
			b = append(b, r.pick(prose)...)
			b = append(b, "';\n"...)
		}
		b = append(b, "\t\treturn $( '."...)
		b = append(b, t.prefix...)
		b = append(b, '-')
		b = append(b, t.noun()...)
		return append(b, "' ).addClass( 'is-active' );\n\t}\n\n"...)
	case 1:
		b = append(b, "\t$( document ).on( '"...)
		b = append(b, r.pick([]string{"click", "change", "submit", "keyup", "focus"})...)
		b = append(b, "', '."...)
		b = append(b, t.prefix...)
		b = append(b, '-')
		b = append(b, t.noun()...)
		b = append(b, "', function( event ) {\n\t\tevent.preventDefault();\n\t\t$.post( ajaxurl, { action: '"...)
		b = append(b, t.prefix...)
		b = append(b, '_')
		b = t.ident(b)
		b = append(b, "', nonce: "...)
		b = append(b, t.prefix...)
		b = append(b, "Settings.nonce } );\n\t} );\n\n"...)
		return b
	default:
		b = append(b, "\tvar "...)
		b = t.camel(b)
		b = append(b, " = {\n"...)
		for range r.between(2, 6) {
			b = append(b, "\t\t"...)
			b = append(b, t.noun()...)
			b = append(b, ": '"...)
			b = appendWords(r, b, int(r.between(1, 5)))
			b = append(b, "',\n"...)
		}
		return append(b, "\t};\n\n"...)
	}
}
