# Renders the traces written by algorithm_traces as SVG:
#   <img>/traces.svg        every trace's admissions under the same load, one row each;
#   <img>/trace_<name>.svg  one trace in three panels:
#     top:    every offered request (grey tick) and every admission (coloured tick, at its
#             decision time, or for acquire() its departure);
#     middle: the permits admitted so far (steps) and the algorithm's bound on them since the
#             start (dashed);
#     bottom: the permits admitted in the trailing period (t - period, t] against the limit and
#             against the algorithm's bound for any span of one period.
# Times are seconds since the start of the run, a window boundary: windows start at whole
# periods (the vertical grid). Every picture has the same time axis.
# usage: gnuplot -e "data='DIR'; img='DIR'" traces.gp   (data: the .dat files and params.gp)

load data.'/params.gp'

is_in(word, list) = strstrt(' '.list.' ', ' '.word.' ') > 0
bucket(a) = is_in(a, 'gcra token_bucket')

# The most permits admissible in [0, t]: a bucket starts full and refills at the rate; the
# leaky bucket lets one go every period/rate; a window admits the limit per aligned window.
# (The 1e-9: t comes from adding up steps, so a whole number of steps may fall just short.)
since_start(a, t) = bucket(a) ? burst + rate * t / period : \
                    a eq 'leaky_bucket' ? 1 + floor(rate * t / period + 1e-9) : \
                    rate * (floor(t / period + 1e-9) + 1)
since_start_title(a) = bucket(a) ? 'bound: burst + rate x t' : \
                       a eq 'leaky_bucket' ? 'bound: one per period/rate' : \
                       a eq 'sliding_window_log' ? 'bound: limit per period' : \
                       'bound: limit per window'
# Where since_start changes slope or steps: it is drawn from samples this far apart (a few
# points, not a finely sampled curve, keeps the SVG small).
since_start_step(a) = bucket(a) ? duration : a eq 'leaky_bucket' ? period / rate : period

# The most permits admissible in any span of one period.
per_period(a) = bucket(a) ? burst + rate : a eq 'fixed_window' ? 2 * rate : \
                a eq 'sliding_window_counter' ? 2 * rate - 1 : rate
per_period_title(a) = per_period(a) == rate ? '' : \
                      sprintf('bound: %s = %d', bucket(a) ? 'burst + rate' : \
                              a eq 'fixed_window' ? '2 x limit' : '2 x limit - 1', per_period(a))

colour(a) = a eq 'gcra' ? '#1f77b4' : a eq 'token_bucket' ? '#2ca02c' : \
            a eq 'leaky_bucket' ? '#9467bd' : a eq 'fixed_window' ? '#d62728' : \
            a eq 'sliding_window_log' ? '#ff7f0e' : '#17becf'
offered_colour = '#a0a0a0'

# The same scales in every picture: time from just before 0 (so that a tick at 0 clears the
# border) to the end of the run; permits up to the largest bound since the start.
most_since_start = rate * (duration / period + 1) > burst + rate * duration / period ? \
                   rate * (duration / period + 1) : burst + rate * duration / period
x_from = -0.02 * duration
xlabel = sprintf('seconds since the start (windows start at whole multiples of %g s)', period)
first = word(traces, 1)

set xrange [x_from:duration]
set xtics 0, period nomirror
set grid xtics lc rgb '#cccccc' dt 1
set lmargin at screen 0.10
set rmargin at screen 0.97

# --- traces.svg: every trace's admissions, one row each, under the offered load on top.
rows = words(traces) + 1
set terminal svg size 900,130 + 34 * rows dynamic noenhanced font 'Helvetica,13' \
  background rgb 'white'
set output img.'/traces.svg'
set title sprintf('One load through each algorithm on Redis: %d per %g s, burst (queue) %d', \
                  rate, period, burst) font ',15'
set lmargin at screen 0.22
set yrange [0:rows]
tics = sprintf("'offered' %g", rows - 0.5)
do for [i = 1:words(traces)] {
  tics = tics.sprintf(", '%s' %g", value('label_'.word(traces, i)), rows - i - 0.5)
}
eval 'set ytics ('.tics.') scale 0'
set xlabel xlabel
unset key
plot data.'/'.first.'.dat' index 0 using 1:(rows - 0.9):(0):(0.8) \
       with vectors nohead lc rgb offered_colour, \
     for [i = 1:words(traces)] data.'/'.word(traces, i).'.dat' index 0 \
       using 2:($3 == 1 ? rows - i - 0.9 : NaN):(0):(0.8) with vectors nohead lw 1.5 \
       lc rgb colour(value('algorithm_'.word(traces, i)))
unset title
set lmargin at screen 0.10

# --- trace_<name>.svg: one trace in three panels.
set terminal svg size 900,660 dynamic noenhanced font 'Helvetica,13' \
  background rgb 'white'
set key top left Left reverse box opaque samplen 2 spacing 1.1

do for [name in traces] {
  a = value('algorithm_'.name)
  file = data.'/'.name.'.dat'
  c = colour(a)
  set output img.'/trace_'.name.'.svg'
  set multiplot title value('title_'.name) font ',15'

  # Every request: a grey tick when offered, a coloured one when admitted (or departed).
  set tmargin at screen 0.91
  set bmargin at screen 0.82
  set format x ''
  unset xlabel
  unset ylabel
  set yrange [0:2]
  set ytics ('offered' 0.5, 'admitted' 1.5) scale 0
  unset key
  plot file index 0 using 1:(0.1):(0):(0.8) with vectors nohead lc rgb offered_colour, \
       '' index 0 using 2:($3 == 1 ? 1.1 : NaN):(0):(0.8) with vectors nohead lw 1.5 lc rgb c

  set tmargin at screen 0.80
  set bmargin at screen 0.43
  set ylabel 'admitted since 0 s'
  set key
  set yrange [0:most_since_start]
  set ytics auto nomirror scale default
  plot file index 0 using 2:4 with steps lw 2.5 lc rgb c title 'permits admitted so far', \
       [t=0:duration:since_start_step(a)] '+' \
         using (t):(bucket(a) ? since_start(a, t) : NaN) with lines dt 2 lw 1.5 \
         lc rgb 'black' title bucket(a) ? since_start_title(a) : '', \
       [t=0:duration:since_start_step(a)] '+' \
         using (t):(bucket(a) ? NaN : since_start(a, t)) with steps dt 2 lw 1.5 \
         lc rgb 'black' title bucket(a) ? '' : since_start_title(a)

  set tmargin at screen 0.40
  set bmargin at screen 0.09
  set format x '%g'
  set xlabel xlabel
  set ylabel sprintf('admitted in last %g s', period)
  set yrange [0:2.7 * rate]
  set ytics rate / 2 nomirror
  stats file index 1 using 2 nooutput
  set label 1 sprintf('most in any %g s: %d', period, STATS_max) at graph 0.98, 0.9 right
  plot file index 1 using 1:2 with steps lw 2.5 lc rgb c \
         title sprintf('admitted in (t - %g s, t]', period), \
       [t=0:duration:duration] '+' using (t):(rate) with lines dt 3 lw 1.5 \
         lc rgb '#555555' title sprintf('limit: %d per %g s', rate, period), \
       [t=0:duration:duration] '+' using (t):(per_period(a) > rate ? per_period(a) : NaN) \
         with lines dt 2 lw 1.5 lc rgb 'black' title per_period_title(a)
  unset label 1
  unset multiplot
}
