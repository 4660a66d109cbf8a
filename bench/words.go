package bench

import "strings"

// The vocabularies the text generators draw from. They are plain word lists
// written for this package; what matters is their size (it sets how well the
// text compresses) and that they look like the real thing in a hex dump.

// prose is English filler for comments, posts, mail bodies and readmes.
var prose = strings.Fields(`
	the a an and or but if then when while because although after before
	of to in on at by for with from about into over under between through
	is are was were be been being has have had do does did can could will
	would should may might must shall not no all any each every some many
	few more most other such only own same so than too very just also now
	here there again once always never often still already soon later today
	this that these those it its we our you your they their he she his her
	site page post user users account order orders product products cart
	checkout payment shipping customer customers theme plugin plugins widget
	menu header footer sidebar content image images gallery video upload
	uploads file files folder setting settings option options field fields
	form forms email message messages comment comments reply link links
	search result results category categories tag tags archive archives
	date time year month week day hour minute update updates version release
	support feature features issue issues error errors warning notice fix
	fixed fixes improve improved improvement performance security cache
	caching database query queries table tables server request response
	session cookie cookies login logout password reset profile admin editor
	author subscriber role roles permission permissions access default
	custom new old current previous next first last other main primary
	secondary simple advanced quick easy fast slow large small full empty
	public private visible hidden enabled disabled active inactive valid
	invalid available required optional manual automatic local remote
	please thanks thank hello hi dear regards best kind sincerely team
	meeting invoice quote proposal project schedule deadline report summary
	attached attachment document documents review feedback question answer
	price prices total discount coupon stock delivery return refund address
	phone contact details information service services company business
	office store shop online mobile desktop browser screen layout design
	color colors font fonts size width height margin padding border background
	block blocks pattern patterns template templates style styles script
	scripts library libraries module modules component components handler
	display show hide load loading save saved delete deleted create created
	edit edited add added remove removed change changed check checked send
	sent receive received open close start stop run running build install
	installed activate activated configure configured register registered
	allow allowed prevent make makes made use used using need needs get
	gets set sets keep keeps find found see seen look looks work works
	working help helps call calls return returns include includes includes
	morning afternoon evening weekend holiday summer winter spring autumn
	garden kitchen coffee bakery studio gallery travel hotel restaurant
	wedding family friends community event events ticket tickets concert
`)

// nouns and verbs make identifiers: function, class, hook and file names.
var nouns = strings.Fields(`
	post posts user meta option term taxonomy comment attachment media
	image block pattern template theme plugin widget menu item nav query
	request response route endpoint schema field setting settings cache
	transient session cookie nonce capability role site network blog
	upload file path url link script style asset handler controller model
	view render parser formatter sanitizer validator filter action hook
	event queue job task cron schedule mail message notice error log logger
	order product cart checkout payment gateway shipping tax coupon customer
	account address invoice report export import backup restore sync feed
	sitemap redirect rewrite rule rules slug title excerpt content status
	type types list table row column data value values key keys config
	loader manager registry factory provider service client api token auth
	editor preview revision draft archive category tag search result page
`)

var verbs = strings.Fields(`
	get set add update delete remove insert save load fetch build render
	parse format sanitize validate escape filter register unregister enqueue
	dequeue init setup handle process prepare maybe ensure check verify
	create make find count sort map merge flush clear reset send notify
	schedule run import export sync migrate convert resolve normalize
	display print output print_r is has can should
`)

// prefixes are plugin and theme slugs' first words.
var prefixes = strings.Fields(`
	acme wpx easy simple smart super ultimate pro quick flex nova zen pixel
	bright swift happy cloud stack lumen astra kadence spectra forma jetpack
	yoast rank seo cache shield guard mail woo elementor gutenberg classic
	contact forms gallery slider events booking members shop stripe paypal
`)

// dirNames name the subdirectories of generated code trees.
var dirNames = strings.Fields(`
	includes inc src lib classes admin public frontend backend assets js css
	images img fonts languages templates partials views blocks widgets
	modules components vendor core utils services controllers models api
	rest integrations compat legacy helpers traits interfaces abstracts
	emails gateways shipping payments reports exporters importers cli
	dist build editor elements fields settings tabs panels pages
`)

var firstNames = strings.Fields(`
	anna ben carla david emma felix grace henry isabel jack karen leo maria
	noah olivia paul quinn rosa sam tina umar vera will xenia yusuf zoe
	lucas mia elena marco sofia tom julia omar nina peter laura ivan
`)

var lastNames = strings.Fields(`
	smith jones brown taylor wilson davies evans thomas johnson roberts
	walker wright robinson thompson white hughes edwards green hall wood
	harris martin jackson clarke lewis young king baker hill moore morgan
	muller schmidt garcia rossi dubois novak kowalski jensen silva costa
`)

var mailDomains = strings.Fields(`
	gmail.com outlook.com yahoo.com icloud.com proton.me gmx.de web.de
	example.org example.net mailbox.org fastmail.com hotmail.co.uk orange.fr
	shop-supplies.com design-studio.net printworks.co accounting-firm.com
`)

var cssProps = strings.Fields(`
	display position top left right bottom width height max-width min-height
	margin margin-top margin-bottom padding padding-left padding-right
	border border-radius border-color background background-color color
	font-size font-weight line-height letter-spacing text-align
	text-decoration text-transform opacity z-index overflow box-shadow
	transition transform flex-direction justify-content align-items gap
	grid-template-columns cursor outline content vertical-align
`)

var cssValues = strings.Fields(`
	0 auto none block inline-block flex grid absolute relative fixed 100%
	50% 1px 2px 4px 8px 10px 12px 14px 16px 20px 24px 32px 40px 1em 1.5em
	0.5rem 1rem 2rem bold normal 400 600 700 center left right uppercase
	hidden inherit pointer transparent #fff #000 #333 #666 #ccc #f5f5f5
	solid space-between column wrap
`)

var htmlTags = strings.Fields(`div section article aside header footer nav span p ul li a`)

var urlPaths = strings.Fields(`
	/ /index.php /wp-login.php /wp-admin/ /wp-admin/admin-ajax.php
	/wp-json/wp/v2/posts /feed/ /shop/ /cart/ /checkout/ /my-account/
	/contact/ /about-us/ /blog/ /category/news/ /tag/summer/ /sitemap.xml
	/robots.txt /favicon.ico /xmlrpc.php /wp-cron.php /?s=garden
	/wp-content/themes/nova/style.css /wp-includes/js/jquery/jquery.min.js
	/wp-content/uploads/2023/06/banner.jpg /product/coffee-beans/
	/events/summer-concert/ /.env /wp-config.php.bak /phpmyadmin/
`)

var userAgents = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
	"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
	"WordPress/6.4.2; https://example.com",
	"curl/8.4.0",
	"python-requests/2.31.0",
}

var monthAbbr = strings.Fields(`Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec`)
